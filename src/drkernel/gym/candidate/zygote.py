"""The zygote (issue 14): one process per device, inside the OS sandbox, with torch, triton and the
harness imported and no CUDA context, that forks every candidate
(``python -m drkernel.gym.candidate.zygote``).

A fresh candidate spends ~5 s of its ~5.5 s start importing torch and triton (measured on an H100,
2026-11-24, `benchmarks/candidate_start.py`); a fork of a process that has them imported reaches a
warm kernel in ~0.8 s. Each fork is still one fresh process per solution, walled off from the
zygote and from every other candidate by namespaces of its own, stacked inside the zygote's
bubblewrap sandbox (which stays the wall against the host):

    zygote (bwrap: uid 65534, read-only root, no network, own pid/ipc namespaces, tmpfs /tmp)
     └── A  unshare(user, mount, pid, ipc, net, uts); maps its uid onto itself     (trusted; waits)
          └── B  pid 1 of a new pid namespace: fresh tmpfs /tmp and /dev/shm, every capability
                 dropped (bounding set too), no_new_privs, not dumpable, a Landlock domain of its
                 own, its own session; then the candidate (`drkernel.gym.candidate.main.serve`)
                 on the channel it was given

B cannot signal the zygote or a sibling (their pids are outside its namespace), cannot read their
files (its /tmp is its own tmpfs; without capabilities it cannot unmount it, and the mounts it
inherited are locked to a less privileged user namespace), cannot see them in its /proc (a fresh
one, of its own pid namespace; CUDA needs it: with the zygote's /proc cuInit fails with 304) nor open
their /proc entries (Landlock denies ptrace access outside its domain), shares no SysV IPC, abstract socket or loopback with
them, and nothing of a job ever reaches the zygote: the orchestrator sends the job on B's own
channel. A kernel without Landlock gets no zygote (fresh processes, as before). The zygote never initialises CUDA (a CUDA context does not survive ``fork``); B
creates its own.

Shared network namespace (``DRKERNEL_FORK_SHARED_NET=1`` in the zygote's environment; off by default,
kept only where a measurement shows that it wins: ``benchmarks/service_scaling.py --shared-net-ab``).
A then creates every namespace but the network one: the forks stay in the zygote's, which bubblewrap
made (only a loopback device, no route anywhere), so none is created or destroyed per candidate.
What a network namespace of its own gave B is kept by other walls: a socket of any family but
``AF_UNIX`` kills the candidate (`drkernel.gym.candidate.seccomp`); B's Landlock domain also handles
TCP bind and connect with no rule allowing them (Landlock ABI 4), and is scoped against abstract
Unix sockets (ABI 6): B can neither connect nor send to one that a process outside its own domain
(the zygote, a sibling) bound, so the loopback and the abstract socket names the siblings now share
reach nobody. Pathname sockets are file system objects, walled off as before (B's /tmp and /dev/shm
are its own, the rest is read-only). A kernel below ABI 6 gets no sharing (each fork its own
network namespace, as by default).

A ``fork`` request carries three descriptors: B's channel (a Unix socket), A's status socket
(A writes B's exit status there, as Popen would report it) and B's log (a pipe's writing end: its
stdout and stderr).
B's first message (``init``) carries a pidfd of itself, through which the orchestrator names,
watches and kills it from outside the nested pid namespace.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import struct
import sys
from typing import Any

from drkernel.gym.messages import LANDLOCK_MIN_ABI, Fork

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
FORK_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS
"""The namespaces A creates for each fork (`enter_namespaces`)."""
SHARED_NET_NAMESPACES = FORK_NAMESPACES & ~CLONE_NEWNET
"""The same without the network namespace: the forks share the zygote's (module docstring)."""
SHARED_NET_ENV = "DRKERNEL_FORK_SHARED_NET"
"""``1`` in the zygote's environment: its forks share its network namespace, where Landlock scopes them."""
SHARED_NET_MIN_ABI = 6  # Landlock's scope against abstract Unix sockets
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
CAP_V3 = 0x20080522
SYS_OPEN_TREE, SYS_MOVE_MOUNT = 428, 429  # x86_64 and aarch64
AT_FDCWD, AT_RECURSIVE, OPEN_TREE_CLONE, O_CLOEXEC, MOVE_MOUNT_F_EMPTY_PATH = -100, 0x8000, 1, 0o2000000, 4
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # x86_64 and aarch64
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
LANDLOCK_ACCESS_FS_MAKE_BLOCK, LANDLOCK_ACCESS_FS_REFER = 1 << 11, 1 << 13
LANDLOCK_ACCESS_NET_BIND_TCP, LANDLOCK_ACCESS_NET_CONNECT_TCP = 1 << 0, 1 << 1
LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SEED_DIR = "/tmp/drkernel-seed-cache"  # in the zygote's own tmpfs; no candidate can reach it
TMP_OPTS = "size={tmp},mode=0700"
SHM_OPTS = "size={shm},mode=1777"

_libc = ctypes.CDLL(None, use_errno=True)


class IsolationError(OSError):
    """A namespace, mount or capability call failed while walling off a fork."""


def _call(name: str, *args: Any) -> None:
    if getattr(_libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"{name}{args[:2]}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str, flags: int, data: str | None = None) -> None:
    _call("mount", source.encode(), target.encode(), fstype.encode(), ctypes.c_ulong(flags),
          data.encode() if data is not None else None)


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_namespaces(flags: int = FORK_NAMESPACES) -> None:
    """In A: new user, mount, pid (for A's children), IPC, network and UTS namespaces, with our uid
    and gid mapped onto themselves (an unprivileged process may map exactly its own ids). ``flags``:
    other sets of namespaces, for ``benchmarks/namespace_cost.py`` only (it must include
    ``CLONE_NEWUSER``).

    The map files of a non-dumpable process belong to root, so A is dumpable while it writes them.
    No request code can use that moment: every candidate runs under Landlock (`landlock_ptrace`),
    which denies it ptrace access (and so /proc/<pid>/fd, mem, environ) to any process outside its
    own domain, A included."""
    uid, gid = os.getuid(), os.getgid()
    _call("unshare", flags)
    _call("prctl", PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    finally:
        _call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    version = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, int(version))


def landlock_ptrace(shared_net: bool = False) -> None:
    """Enter a Landlock domain of our own. Its file rules only forbid making block devices (renames
    across directories are granted everywhere; nothing else of the file system changes); what matters is Landlock's ptrace rule: a process in a domain
    cannot ptrace, nor open the /proc files guarded by ptrace access, of any process outside its
    domain or the domains nested in it. So a candidate cannot reach the zygote, A, or a sibling
    (each in a domain of its own), whatever their uid or dumpable flag. Needs no_new_privs.
    ``shared_net`` (the fork shares the zygote's network namespace, ABI >= 6): the domain also denies
    every TCP bind and connect, and connecting or sending to an abstract Unix socket bound outside it."""
    fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_REFER
    if shared_net:  # struct landlock_ruleset_attr: handled_access_fs, handled_access_net, scoped
        net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP
        attr = struct.pack("=QQQ", fs, net, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)
    else:
        attr = struct.pack("=Q", fs)
    fd = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)
    if fd < 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    root = os.open("/", os.O_PATH | os.O_DIRECTORY)
    try:
        # renames across directories (Triton's cache writes a temp dir, then renames) stay allowed:
        # a domain that does not grant REFER refuses every reparenting with EXDEV
        rule = struct.pack("=Qi", LANDLOCK_ACCESS_FS_REFER, root)
        if _libc.syscall(SYS_LANDLOCK_ADD_RULE, fd, LANDLOCK_RULE_PATH_BENEATH, ctypes.c_char_p(rule), 0) != 0:
            err = ctypes.get_errno()
            raise IsolationError(err, f"landlock_add_rule: {os.strerror(err)}")
        if _libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, fd, 0) != 0:
            err = ctypes.get_errno()
            raise IsolationError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(root)
        os.close(fd)


def wall_off(tmp_bytes: int, shm_bytes: int, private_tmp: bool = True, shared_net: bool = False) -> list[str]:
    """In B (pid 1 of the new pid namespace): private mounts, then drop every capability and enter a
    Landlock domain (scoped for a shared network namespace: `landlock_ptrace`). Returns
    what could not be done (a fresh /proc is refused where the outer /proc has covered parts, as
    bubblewrap's has when it runs as root and the boot did not uncover it: B then keeps the zygote's
    /proc, in which it cannot address any process, but CUDA fails to initialise)."""
    notes = []
    _mount("none", "/", "", MS_REC | MS_PRIVATE)
    if private_tmp:
        kept = [(mp, os.path.isdir(mp), _clone_tree(mp)) for mp in _mounts_below("/tmp")]  # a checkout there
        _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, TMP_OPTS.format(tmp=tmp_bytes))
        for mp, is_dir, fd in kept:
            _attach_tree(fd, mp, is_dir)
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, SHM_OPTS.format(shm=shm_bytes))
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except IsolationError as e:
        notes.append(f"no fresh /proc ({e.strerror})")
    drop_capabilities(shared_net)
    return notes


def _mounts_below(root: str) -> list[str]:
    """Mount points strictly below ``root`` that are not below another of them (mountinfo order)."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])
            if mp.startswith(root.rstrip("/") + "/"):
                points.append(mp)
    out: list[str] = []
    for mp in sorted(set(points)):
        if not any(mp.startswith(q + "/") for q in out):
            out.append(mp)
    return out


def _clone_tree(path: str) -> int:
    """A detached copy of the mount tree at ``path`` (open_tree), to re-attach above a new /tmp:
    the sandbox binds the PYTHONPATH and the virtualenv, which may live under /tmp, read-only there,
    and the copy keeps them read-only (their flags are locked to the outer user namespace)."""
    fd = _libc.syscall(SYS_OPEN_TREE, AT_FDCWD, path.encode(), OPEN_TREE_CLONE | O_CLOEXEC | AT_RECURSIVE)
    if fd < 0:
        err = ctypes.get_errno()
        raise IsolationError(err, f"open_tree({path}): {os.strerror(err)}")
    return fd


def _attach_tree(fd: int, path: str, is_dir: bool) -> None:
    try:
        if is_dir:
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "ab").close()
        if _libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, path.encode(), MOVE_MOUNT_F_EMPTY_PATH) != 0:
            err = ctypes.get_errno()
            raise IsolationError(err, f"move_mount({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def drop_capabilities(shared_net: bool = False) -> None:
    """Bounding set, ambient set, then effective/permitted/inheritable all empty; no_new_privs; a
    Landlock domain (`landlock_ptrace`)."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            last = int(f.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = struct.pack("=Ii", CAP_V3, 0)
    data = bytes(24)  # two {effective, permitted, inheritable} u32 triples, all zero
    _call("capset", ctypes.c_char_p(header), ctypes.c_char_p(data))
    _call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    _call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)  # siblings (same uid) cannot open our /proc/<pid>/*
    landlock_ptrace(shared_net)


def _only_fds(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep and fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def run_b(chan_fd: int, log_fd: int, request: Fork, seed: dict[str, bytes], shared_net: bool = False) -> None:
    """B: the candidate (or, for a ``seed`` request, the one trusted fork that warms the seed cache).
    Never returns."""
    try:
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        _only_fds({0, 1, 2, chan_fd})
        from drkernel.gym.candidate.main import serve, torch, warm_up
        from drkernel.gym.ipc import Channel
        from drkernel.gym.messages import Op, Signal

        if request.seed:  # a trusted fork without a job: compile the warm-up kernel into the zygote's dir
            wall_off(request.tmp_bytes, request.shm_bytes, private_tmp=False, shared_net=shared_net)
            os.environ["TRITON_CACHE_DIR"] = SEED_DIR
            warm_up(torch.device(os.environ["DRKERNEL_DEVICE"]))
            Channel(chan_fd).send(Signal(Op.SEEDED).to_header())
            os._exit(0)
        for note in wall_off(request.tmp_bytes, request.shm_bytes, shared_net=shared_net):
            print(f"zygote fork: {note}", file=sys.stderr)
        _seed_cache(seed)
        serve(Channel(chan_fd), pidfd=os.pidfd_open(os.getpid()))
    except BaseException as e:  # noqa: BLE001 - report and leave; the orchestrator sees the channel close
        print(f"zygote fork failed: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        sys.stderr.flush()
        os._exit(70)


def _seed_cache(seed: dict[str, bytes]) -> None:
    """Write the harness's warm-up kernel into this fork's (empty) Triton cache."""
    root = os.environ.get("TRITON_CACHE_DIR")
    if not root or not seed:
        return
    for rel, data in seed.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def fork_candidate(fds: list[int], request: Fork, seed: dict[str, bytes], close: list[int],
                   shared_net: bool = False) -> int:
    """Fork A (which walls itself off and forks B); returns A's pid. ``close``: the zygote's own
    descriptors, closed in A before anything else. ``shared_net``: A keeps the zygote's network
    namespace and B's Landlock domain is scoped (module docstring)."""
    chan_fd, status_fd, log_fd = fds
    pid = os.fork()
    if pid:
        return pid
    code = 0
    try:
        for fd in close:
            os.close(fd)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        enter_namespaces(SHARED_NET_NAMESPACES if shared_net else FORK_NAMESPACES)
        _call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)
        b = os.fork()
        if b == 0:
            os.close(status_fd)
            run_b(chan_fd, log_fd, request, seed, shared_net)
        os.close(chan_fd)
        os.close(log_fd)
        _, status = os.waitpid(b, 0)
        os.write(status_fd, struct.pack(">i", os.waitstatus_to_exitcode(status)))
    except BaseException as e:  # noqa: BLE001
        try:
            os.write(log_fd, f"zygote fork failed: {type(e).__name__}: {e}\n".encode())
        except OSError:
            pass
        code = 70
    finally:
        os._exit(code)


def read_seed(root: str) -> dict[str, bytes]:
    """Every file of a Triton cache directory (relative path -> bytes); small (one kernel)."""
    out: dict[str, bytes] = {}
    if not os.path.isdir(root):
        return out
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def shares_network(abi: int) -> bool:
    """Whether the forks share the zygote's network namespace: asked for (`SHARED_NET_ENV`) and a
    Landlock that scopes abstract Unix sockets (else each fork gets its own, with a note)."""
    if os.environ.get(SHARED_NET_ENV) != "1":
        return False
    if abi < SHARED_NET_MIN_ABI:
        print(f"zygote: {SHARED_NET_ENV}=1 needs Landlock ABI {SHARED_NET_MIN_ABI} (this kernel: {abi}); "
              "each fork gets a network namespace of its own", file=sys.stderr)
        return False
    return True


def main() -> None:
    from drkernel.gym.candidate import main as candidate  # torch, triton and the harness: the point
    from drkernel.gym.candidate import guards, integrity, launches, profiling  # noqa: F401
    from drkernel.gym.harness import recorder, timing  # noqa: F401
    from drkernel.gym.ipc import child_channel
    from drkernel.gym.messages import Error, Fork, Forked, Op, Ready, Signal, parse

    device = os.environ.get("DRKERNEL_DEVICE", "cpu")
    if device == "cpu":
        candidate.warm_up(candidate.torch.device("cpu"))  # the interpreter's patches; no device to touch
    else:
        from drkernel.gym.harness import vmm  # noqa: F401
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # A's exit needs no reaping here
    # a fork shares our uid: it must not read our memory, descriptors (the channel) or environment
    _call("prctl", PR_SET_DUMPABLE, 0, 0, 0, 0)
    channel = child_channel()
    abi = landlock_abi()
    channel.send(Ready(os.getpid(), landlock=abi).to_header())
    if abi < LANDLOCK_MIN_ABI:  # without it a fork could reach its siblings through /proc: refuse to be used
        print("zygote: the kernel has no Landlock; candidates start as fresh processes", file=sys.stderr)
    shared_net = shares_network(abi)
    seed: dict[str, bytes] = {}
    while True:
        msg = channel.recv(max_fds=3)
        try:
            request = parse(msg.header)
            if request.op is Op.SHUTDOWN:
                break
            if request.op is Op.SEED:  # the seed fork has warmed the cache at SEED_DIR: keep its files
                seed = read_seed(SEED_DIR)
                channel.send(Signal(Op.SEEDED).to_header())
            elif isinstance(request, Fork) and len(msg.fds) == 3:
                pid = fork_candidate(msg.fds, request, seed, [channel.read_fd, channel.write_fd], shared_net)
                channel.send(Forked(pid).to_header())
            else:
                raise ValueError(f"unexpected {msg.op!r} with {len(msg.fds)} descriptors")
        except Exception as e:  # noqa: BLE001
            channel.send(Error("zygote", type(e).__name__, str(e)[:4000]).to_header())
        finally:
            for fd in msg.fds:
                os.close(fd)
    os._exit(0)


if __name__ == "__main__":
    main()
