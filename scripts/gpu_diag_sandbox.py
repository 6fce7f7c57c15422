"""Which wall stops CUDA in a sandboxed candidate.

Default: the gold ReLU on the GPU under each combination of zygote and seccomp filter (and, run as
an unprivileged user, without the root identity switch).

``--walls``: where a zygote's fork loses CUDA. Started as host root, the zygote's forks fail cuInit
with 304 (CUDA_ERROR_OPERATING_SYSTEM) while fresh candidates under the same identity initialise.
One sandboxed child is started through the real runner as the zygote is (as root: identity dropped
to 65534, its own user namespace; torch and triton imported, no CUDA context), and forks once per
step of a fork's walls (`drkernel.gym.candidate.zygote`), each probe one step further than the last.
Each probe reports what it can read and open (its ids, capabilities, dumpable flag, the owner of
its /proc files, the GPU nodes, /dev/shm, threads, its namespaces) and then cuInit's result, read
through libcuda itself; the first probe whose cuInit fails names the step, and the facts that differ
from the probe before it are printed. Two further probes tell the process's state from its walls:
the fully walled fork made dumpable again, and a program it executes (a fresh memory map, owned by
the fork's own user namespace rather than the one the zygote was executed in).

`PYTHONPATH=src:tests/gym python scripts/gpu_diag_sandbox.py [--device cuda:0] [--walls] [--out FILE]`."""
from __future__ import annotations

import argparse
import ctypes
import glob
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

WALLS_ENV = "DRKERNEL_DIAG_WALLS"
PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
STEPS = ("fork", "namespaces", "mounts", "capabilities", "landlock")
"""A fork's walls in the order the zygote builds them: fork (A), A's new namespaces and B forked as
pid 1, B's private mounts, every capability dropped with no_new_privs and not dumpable, Landlock."""
CUINIT = ("import ctypes, json; lib = ctypes.CDLL('libcuda.so.1'); rc = lib.cuInit(0); "
          "print(json.dumps({'cuInit': rc}))")


def evaluator_matrix(device: str) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gym"))
    from drkernel.gym import InProcessEvaluator
    from gym_cases import RELU_SOLUTION, request

    print("uid", os.getuid(), "nodes", sorted((n, oct(os.stat(f"/dev/{n}").st_mode & 0o777), os.stat(f"/dev/{n}").st_gid)
                                         for n in os.listdir("/dev") if n.startswith("nvidia")))
    bad = 0
    for zygote in (True, False):
        for seccomp in (True, False):
            t0 = time.monotonic()
            with InProcessEvaluator(device=device, concurrency=1, pool_size=1, zygote=zygote,
                                    seccomp=seccomp) as ev:
                r = ev.evaluate(request(RELU_SOLUTION, device=device))
                info = ev.device_info()
            ok = r.status.value == "correct"
            bad += not ok
            print(f"DIAG zygote={zygote} seccomp={seccomp}: {r.status.value} zygote_up={info.get('zygote')} "
                  f"({time.monotonic() - t0:.1f} s)\n  error: {(r.error or '')[-1500:]}", flush=True)
    return 1 if bad else 0


# -- --walls: the parent, on the host ----------------------------------------------------------------

def walls(device: str, out: str | None) -> int:
    """Start the zygote-like child through the real runner and print what its probes report."""
    from drkernel.gym.orchestrator.sandbox import CANDIDATE_LIMITS, Spawn, child_env, make_runner

    runner = make_runner()
    here = str(Path(__file__).resolve().parent)  # bound read-only into the child, which imports this file
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    env = child_env({WALLS_ENV: "child"}, private=runner.private_dir(), sandboxed=True)
    env["DRKERNEL_DEVICE"] = device
    reader, writer = os.pipe()
    null = os.open(os.devnull, os.O_RDWR)
    proc = runner.popen(Spawn("gpu_diag_sandbox", env, stdin=null, stdout=null, stderr=writer,
                              limits=CANDIDATE_LIMITS, gpu=True))
    os.close(writer)
    os.close(null)
    from drkernel.gym.candidate.zygote import landlock_abi

    print(f"runner {runner.name} as_root={getattr(runner, 'as_root', None)} uid={os.getuid()} "
          f"kernel={os.uname().release} landlock_abi={landlock_abi()}", flush=True)
    probes: dict[str, dict] = {}
    with os.fdopen(reader, errors="replace") as f:
        for line in f:
            if line.startswith("DIAG-WALLS "):
                label, report = json.loads(line[len("DIAG-WALLS "):])
                probes[label] = report
                print(f"DIAG-WALLS {label}: {_cuda_summary(report)}", flush=True)
            else:
                print("  child:", line.rstrip()[:2000], flush=True)
    proc.wait(timeout=60)
    _explain(probes)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(probes, indent=1, default=str))
    failed = [k for k, v in probes.items() if (v.get("cuda") or {}).get("cuInit") != 0]
    return 1 if failed or not probes else 0


def _cuda_summary(report: dict) -> str:
    cuda = report.get("cuda") or {}
    return f"cuInit={cuda.get('cuInit')} {cuda.get('name', '')} devices={cuda.get('devices')} " \
           f"error={report.get('error', '')} notes={report.get('notes', [])}"


def _explain(probes: dict[str, dict]) -> None:
    """The first probe that fails cuInit, and the facts that differ from the probe before it."""
    labels = list(probes)
    for prev, cur in itertools.pairwise(labels):
        ok_before = (probes[prev].get("cuda") or {}).get("cuInit") == 0
        ok_now = (probes[cur].get("cuda") or {}).get("cuInit") == 0
        if ok_before and not ok_now:
            print(f"DIAG-WALLS first failure: {cur} (after {prev})")
            a, b = probes[prev].get("facts", {}), probes[cur].get("facts", {})
            for key in sorted(set(a) | set(b)):
                if a.get(key) != b.get(key):
                    print(f"  {key}: {str(a.get(key))[:300]} -> {str(b.get(key))[:300]}")
            return
    print("DIAG-WALLS no step between a passing and a failing probe"
          + ("" if all((p.get("cuda") or {}).get("cuInit") == 0 for p in probes.values()) else
             " (the first probe failed already: the zygote-like process itself, not a wall)"))


# -- --walls: the child, inside the sandbox (the zygote's place) ---------------------------------------

def walls_child() -> None:
    import torch  # noqa: F401  as the zygote: torch and triton imported, no CUDA context
    import triton  # noqa: F401

    from drkernel.gym.candidate import zygote  # noqa: F401  (the probes' walls)

    libc = ctypes.CDLL(None, use_errno=True)
    _report("dumpable parent, fork", _probe(("fork",)))
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # the zygote is not dumpable (its forks share its uid)
    for i in range(1, len(STEPS) + 1):
        _report("+".join(STEPS[:i]), _probe(STEPS[:i]))
    _report("+".join(STEPS) + "+dumpable", _probe((*STEPS, "dumpable")))
    _report("+".join(STEPS) + "+exec", _probe((*STEPS, "exec")))
    for flags in SPLIT:  # which of A's namespaces alone loses CUDA
        _report("only " + flags, _probe(("only " + flags,)))


def _report(label: str, report: dict) -> None:
    print("DIAG-WALLS " + json.dumps([label, report], default=str), flush=True)


def _probe(steps: tuple[str, ...]) -> dict:
    """Fork; the fork takes ``steps`` and reports as JSON through a pipe."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(reader)
        _in_probe(steps, writer)
    os.close(writer)
    chunks = []
    while chunk := os.read(reader, 1 << 16):
        chunks.append(chunk)
    os.close(reader)
    os.waitpid(pid, 0)
    data = b"".join(chunks)
    return json.loads(data) if data else {"error": "the probe reported nothing"}


def _in_probe(steps: tuple[str, ...], writer: int) -> None:
    """In the fork: A's namespaces (then B, pid 1, carries on), B's walls as far as ``steps`` go, then
    the facts and cuInit. Never returns."""
    from drkernel.gym.candidate import zygote
    from drkernel.gym.orchestrator.sandbox import CANDIDATE_LIMITS

    out: dict = {"steps": list(steps)}
    try:
        if steps[0].startswith("only "):
            _enter_only(steps[0][len("only "):].split("+"), writer)
        if "namespaces" in steps:
            zygote.enter_namespaces()
            b = os.fork()
            if b:  # A: waits for B, as in the zygote
                os.close(writer)
                os.waitpid(b, 0)
                os._exit(0)
        if "mounts" in steps:
            if "capabilities" not in steps:
                zygote.drop_capabilities = lambda: None
            elif "landlock" not in steps:
                zygote.landlock_ptrace = lambda: None
            out["notes"] = zygote.wall_off(CANDIDATE_LIMITS.tmp_bytes, CANDIDATE_LIMITS.shm_bytes)
        if "dumpable" in steps:
            ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        out["facts"] = facts()
        if "exec" in steps:
            r = subprocess.run([sys.executable, "-c", CUINIT], capture_output=True, text=True, timeout=120, check=False)
            out["cuda"] = json.loads(r.stdout) if r.returncode == 0 else {"cuInit": None, "name": r.stderr[-500:]}
        else:
            out["cuda"] = cuda_init()
    except BaseException as e:  # noqa: BLE001 - a diagnostic reports whatever happened
        out["error"] = f"{type(e).__name__}: {e}"
    data = json.dumps(out, default=str).encode()
    while data:
        data = data[os.write(writer, data):]
    os._exit(0)


SPLIT = ("user", "user+mnt", "user+ipc", "user+net", "user+uts", "user+pid", "user+pid+mnt", "user+cgroup")
"""A's namespaces one at a time after a new user namespace (pid: the probe forks and is pid 1 of it)."""
_NS_FLAGS = {"mnt": 0x00020000, "uts": 0x04000000, "ipc": 0x08000000, "user": 0x10000000, "pid": 0x20000000,
             "net": 0x40000000, "cgroup": 0x02000000}


def _enter_only(names: list[str], writer: int) -> None:
    """unshare() just ``names`` (the uid and gid mapped onto themselves, as A does); for a new pid
    namespace fork and go on as its pid 1, the parent waiting."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    flags = 0
    for name in names:
        flags |= _NS_FLAGS[name]
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), f"unshare({names})")
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as f:
            f.write(text)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    if "pid" in names:
        b = os.fork()
        if b:
            os.close(writer)
            os.waitpid(b, 0)
            os._exit(0)


def cuda_init() -> dict:
    """cuInit(0) through libcuda, its error name, and the device count."""
    lib = ctypes.CDLL("libcuda.so.1")
    rc = lib.cuInit(0)
    name = ctypes.c_char_p()
    lib.cuGetErrorName(rc, ctypes.byref(name))
    count = ctypes.c_int(-1)
    if rc == 0:
        lib.cuDeviceGetCount(ctypes.byref(count))
    return {"cuInit": rc, "name": (name.value or b"").decode(), "devices": count.value}


def facts() -> dict:
    """What this process is and can reach, without touching CUDA."""
    out: dict = {"ids": [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()], "getpid": os.getpid(),
                 "dumpable": ctypes.CDLL(None).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)}
    status = _try(lambda: _read("/proc/self/status").decode())
    for line in status.splitlines() if not status.startswith("!") else []:
        key = line.split(":")[0]
        if key in ("Uid", "Gid", "Groups", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "Seccomp", "NSpid"):
            out[f"status {key}"] = line.split(":", 1)[1].strip()
    for path in ("/proc/self/environ", "/proc/self/auxv", "/proc/self/maps", "/proc/self/mountinfo",
                 f"/proc/{os.getpid()}/status", "/proc/driver/nvidia/params", "/proc/driver/nvidia/version"):
        out[f"read {path}"] = _try(lambda p=path: f"ok {len(_read(p))} bytes")
        out[f"owner {path}"] = _try(lambda p=path: os.stat(p).st_uid)
    for node in sorted(glob.glob("/dev/nvidia*")):
        out[f"open {node}"] = _try(lambda n=node: (os.close(os.open(n, os.O_RDWR)), "ok")[1])
    out["/dev/shm mmap"] = _try(_shm_mmap)
    out["memfd"] = _try(lambda: (os.close(os.memfd_create("diag")), "ok")[1])
    out["threads"] = _try(_threads)
    out["namespaces"] = {ns: _try(lambda n=ns: os.readlink(f"/proc/self/ns/{n}"))
                         for ns in ("user", "mnt", "pid", "ipc", "net", "cgroup")}
    out["mounts"] = _try(lambda: [" ".join(line.split()[4:7]) for line in _read("/proc/self/mountinfo").decode().splitlines()
                                  if line.split()[4] in ("/", "/dev", "/dev/shm", "/proc", "/sys", "/tmp")
                                  or "nvidia" in line.split()[4]])
    return out


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _shm_mmap() -> str:
    import mmap

    path = f"/dev/shm/diag-{os.getpid()}"
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, 1 << 20)
        with mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED) as m:
            m[0] = 1
        return "ok"
    finally:
        os.close(fd)
        os.unlink(path)


def _threads() -> str:
    done = threading.Barrier(17)
    threads = [threading.Thread(target=done.wait, args=(30,)) for _ in range(16)]
    for t in threads:
        t.start()
    done.wait(30)
    for t in threads:
        t.join()
    return "16 ok"


def _try(fn) -> object:
    try:
        return fn()
    except BaseException as e:  # noqa: BLE001
        return f"! {type(e).__name__}: {e}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--walls", action="store_true", help="bisect the zygote fork's walls by cuInit")
    ap.add_argument("--out", help="--walls: the probes' reports as JSON")
    args = ap.parse_args()
    return walls(args.device, args.out) if args.walls else evaluator_matrix(args.device)


if __name__ == "__main__":
    if os.environ.get(WALLS_ENV) == "child":
        walls_child()
        sys.exit(0)
    sys.exit(main())
