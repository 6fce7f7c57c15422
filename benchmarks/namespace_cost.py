"""What a candidate's namespaces cost to create and destroy, one at a time and N at once, split by kind.

Each cycle is a zygote fork's walls without the candidate: a process A enters new namespaces
(`drkernel.gym.candidate.zygote.enter_namespaces`, the zygote's own code, with the variant's flags) and
forks B, which walls itself off (`zygote.wall_off`: private /tmp and /dev/shm tmpfs, a fresh /proc,
capabilities dropped, a Landlock domain), reports that it is up and exits; A reaps B and exits.
``--lanes`` N keeps N cycles in flight at once (a new one starts when one ends), ``--cycles`` per lane.

Variants: ``full`` (user, mount, pid, IPC, network, UTS: what every fork gets), the same without one
kind (``no-net``, ``no-ipc``, ``no-pid``, ``no-uts``), ``shared-net`` (``no-net`` with B's Landlock
domain scoped, as ``DRKERNEL_FORK_SHARED_NET=1`` runs a fork), ``user+mount`` only, ``fork-only`` (A and B, no
namespace, no walls: the two forks' own cost) and ``one-fork`` (A alone). Variants without a kind
but ``shared-net`` are for measurement only. ``--zygote-rounds`` adds batches of N real candidates forked by a real zygote
(``--zygote-devices``, one zygote each, default the CPU; on GPUs ready includes the candidate's CUDA
context and warm-up kernel) to ready and killed; ``--torch-parent`` repeats ``full``, ``fork-only``
and ``one-fork`` from a parent with torch imported, the size of a zygote (a fork copies its page tables).

Per variant and N:

* ``start``: from A's fork to B up (namespaces created, B walled off), median and p95;
* ``teardown``: from B up to A reaped (B's exit, its pid namespace, A's exit, the namespaces' last
  references dropped); a network namespace is then cleaned up by a kernel worker, which no process's
  times show: the host's system time does;
* ``cycles_per_s`` over the run and ``host_sys_s_per_cycle`` (``/proc/stat`` system + irq + softirq
  of all CPUs over the run, per cycle: includes other processes' system time on a shared host) beside
  ``own_sys_s_per_cycle`` (A's and B's own, from their rusage).

A kind that serialises the host shows as a start or teardown that grows with N while the CPUs idle,
and as host system time beyond the processes' own.

    PYTHONPATH=src python3 benchmarks/namespace_cost.py --lanes 1,2,4,8 --out out/namespace_cost.json

Runs on the host as the user that starts it (as root too: A maps its uid onto itself in its new
user namespace, as a fork of the zygote does inside the sandbox).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import statistics
import struct
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from drkernel.gym.candidate import zygote

FULL = zygote.FORK_NAMESPACES
VARIANTS = {
    "full": FULL,
    "no-net": FULL & ~zygote.CLONE_NEWNET,
    "shared-net": zygote.SHARED_NET_NAMESPACES,  # no-net with B's Landlock domain scoped: the setting
    "no-ipc": FULL & ~zygote.CLONE_NEWIPC,
    "no-pid": FULL & ~zygote.CLONE_NEWPID,
    "no-uts": FULL & ~zygote.CLONE_NEWUTS,
    "user+mount": zygote.CLONE_NEWUSER | zygote.CLONE_NEWNS,
    "fork-only": 0,
    "one-fork": -1,  # A alone reports and exits: no namespace, no B (a fork's share of fork-only)
}
TMP_BYTES, SHM_BYTES = 64 << 20, 64 << 20


@dataclass(frozen=True)
class Cycle:
    """One A/B pair: seconds from A's fork to B up, and from B up to A reaped."""

    start_s: float
    teardown_s: float
    ok: bool


@dataclass
class Run:
    """One variant at one N: the cycles' spreads and the run's rate and system time."""

    variant: str
    lanes: int
    cycles: int
    failed: int
    wall_s: float
    cycles_per_s: float
    start: dict[str, float]
    teardown: dict[str, float]
    host_sys_s_per_cycle: float
    own_sys_s_per_cycle: float
    parent_rss_mb: float  # the forking process's size: a fork copies its page tables


def a_process(flags: int, w: int, scoped: bool = False) -> None:
    """A: enter the namespaces, fork B, reap it; never returns. B writes its up-time on ``w``
    (``scoped``: B's Landlock domain as with ``DRKERNEL_FORK_SHARED_NET=1``)."""
    code = 0
    try:
        if flags == VARIANTS["one-fork"]:
            os.write(w, struct.pack("=d", time.monotonic()))
            os._exit(0)
        if flags:
            zygote.enter_namespaces(flags)
        b = os.fork()
        if b == 0:
            try:
                if flags & zygote.CLONE_NEWNS:
                    zygote.wall_off(TMP_BYTES, SHM_BYTES, shared_net=scoped)
                os.write(w, struct.pack("=d", time.monotonic()))
            finally:
                os._exit(0)
        os.close(w)
        _, status = os.waitpid(b, 0)
        code = 0 if os.waitstatus_to_exitcode(status) == 0 else 71
    except BaseException as e:  # noqa: BLE001 - reported by the exit status
        os.write(2, f"namespace_cost: A failed: {type(e).__name__}: {e}\n".encode())
        code = 70
    finally:
        os._exit(code)


def start_cycle(variant: str) -> tuple[int, int, int, float]:
    """Fork A; returns (its pidfd, the read end B reports on, its pid, the fork's time)."""
    r, w = os.pipe()
    t = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        a_process(VARIANTS[variant], w, scoped=variant == "shared-net")
    os.close(w)
    return os.pidfd_open(pid), r, pid, t


def sys_jiffies() -> float:
    """All CPUs' system + irq + softirq time from ``/proc/stat``, in seconds."""
    with open("/proc/stat") as f:
        v = f.readline().split()
    return (int(v[3]) + int(v[6]) + int(v[7])) / os.sysconf("SC_CLK_TCK")


def run(variant: str, lanes: int, cycles: int) -> Run:
    """``lanes`` cycles in flight until ``lanes x cycles`` have ended."""
    total = lanes * cycles
    sel = selectors.DefaultSelector()
    state: dict[int, dict] = {}  # pid -> t0, up, pidfd, r
    done: list[Cycle] = []
    started = 0
    sys0, own0, t0 = sys_jiffies(), os.times(), time.monotonic()

    def launch() -> None:
        nonlocal started
        pidfd, r, pid, t = start_cycle(variant)
        state[pid] = {"t0": t, "up": None, "pidfd": pidfd, "r": r}
        sel.register(r, selectors.EVENT_READ, ("up", pid))
        sel.register(pidfd, selectors.EVENT_READ, ("exit", pid))
        started += 1

    while started < min(lanes, total):
        launch()
    while state:
        for key, _ in sel.select():
            kind, pid = key.data
            s = state.get(pid)
            if s is None:
                continue
            if kind == "up":
                data = os.read(s["r"], 8)
                s["up"] = struct.unpack("=d", data)[0] if len(data) == 8 else None
                sel.unregister(s["r"])
                continue
            now = time.monotonic()
            _, status = os.waitpid(pid, 0)
            for fd in (s["pidfd"], s["r"]):
                if sel.get_map().get(fd) is not None:
                    sel.unregister(fd)
                os.close(fd)
            del state[pid]
            up = s["up"]
            ok = up is not None and os.waitstatus_to_exitcode(status) == 0
            done.append(Cycle(up - s["t0"] if up else now - s["t0"], now - up if up else 0.0, ok))
            if started < total:
                launch()
    wall, own1 = time.monotonic() - t0, os.times()
    good = [c for c in done if c.ok]
    return Run(variant=variant, lanes=lanes, cycles=len(done), failed=len(done) - len(good), wall_s=wall,
               cycles_per_s=len(done) / wall, start=spread([c.start_s for c in good]),
               teardown=spread([c.teardown_s for c in good]),
               host_sys_s_per_cycle=(sys_jiffies() - sys0) / len(done),
               own_sys_s_per_cycle=(own1.children_system - own0.children_system) / len(done),
               parent_rss_mb=rss_mb())


def spread(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    xs = sorted(xs)
    return {"n": len(xs), "median": statistics.median(xs), "p95": xs[min(len(xs) - 1, int(0.95 * len(xs)))],
            "mean": statistics.mean(xs)}


def report(r: Run) -> None:
    ms = lambda d, k: f"{1e3 * d[k]:7.2f}" if d else "    n/a"
    print(f"{r.variant:<11} N={r.lanes}  {r.cycles_per_s:7.1f} cycles/s  start median {ms(r.start, 'median')} "
          f"p95 {ms(r.start, 'p95')} ms  teardown median {ms(r.teardown, 'median')} p95 {ms(r.teardown, 'p95')} ms  "
          f"sys/cycle host {1e3 * r.host_sys_s_per_cycle:6.2f} own {1e3 * r.own_sys_s_per_cycle:6.2f} ms"
          f"  parent {r.parent_rss_mb:.0f} MB" + (f"  FAILED {r.failed}" if r.failed else ""), flush=True)


def zygote_batch(zygotes: list, lanes: int) -> dict[str, float]:
    """``lanes`` candidates forked by the real zygotes (round robin) at once, each to ready (on a GPU:
    its CUDA context and warm-up kernel), then all killed at once: the batch's walls, each candidate's
    start (fork request to ready) and exit (SIGKILL to A's report of its status), and the host's
    system seconds per candidate."""
    from concurrent.futures import ThreadPoolExecutor

    def up(i: int):
        t = time.monotonic()
        child = zygotes[i % len(zygotes)].fork()
        child.wait_ready()
        return child, time.monotonic() - t

    def down(child) -> float:
        t = time.monotonic()
        child.discard()
        return time.monotonic() - t

    sys0, t0 = sys_jiffies(), time.monotonic()
    with ThreadPoolExecutor(lanes) as pool:
        started = list(pool.map(up, range(lanes)))
        t1 = time.monotonic()
        exits = list(pool.map(down, [c for c, _ in started]))
    t2 = time.monotonic()
    return {"lanes": lanes, "up_wall_s": t1 - t0, "down_wall_s": t2 - t1, "start_s": [s for _, s in started],
            "exit_s": exits, "host_sys_s_per_candidate": (sys_jiffies() - sys0) / lanes}


def zygote_runs(lanes: list[int], rounds: int, devices: list[str], arms: tuple[bool, ...] = (False,)) -> list[dict]:
    """`zygote_batch` ``rounds`` times per N, on real zygotes (one per device) in the real sandbox; one set
    of zygotes per arm (``True``: forks sharing the zygote's network namespace), batches alternating."""
    from drkernel.gym.orchestrator.sandbox import bwrap_runner
    from drkernel.gym.orchestrator.zygote import Zygote

    zygotes: dict[bool, list] = {}
    out = []
    try:
        for shared in arms:  # the zygote reads the setting from the environment it starts with
            os.environ[zygote.SHARED_NET_ENV] = "1" if shared else "0"
            zygotes[shared] = [Zygote(d, {}, bwrap_runner()) for d in devices]
        os.environ.pop(zygote.SHARED_NET_ENV)
        for n in lanes:
            batches: dict[bool, list] = {shared: [] for shared in arms}
            for _ in range(rounds):
                for shared in arms:
                    batches[shared].append(zygote_batch(zygotes[shared], n))
            out += [zygote_summary(n, devices, rounds, shared, batches[shared]) for shared in arms]
    finally:
        for zyg in (z for zs in zygotes.values() for z in zs):
            zyg.close()
    return out


def zygote_summary(n: int, devices: list[str], rounds: int, shared: bool, batches: list[dict]) -> dict:
    start = spread([s for b in batches for s in b["start_s"]])
    exits = spread([s for b in batches for s in b["exit_s"]])
    sys_per = statistics.mean(b["host_sys_s_per_candidate"] for b in batches)
    print(f"zygote{' shared-net' if shared else ''} N={n} on {len(devices)} device(s)  start median "
          f"{1e3 * start['median']:7.1f} p95 {1e3 * start['p95']:7.1f} ms  exit median {1e3 * exits['median']:7.1f} "
          f"p95 {1e3 * exits['p95']:7.1f} ms  host sys/candidate {1e3 * sys_per:6.1f} ms", flush=True)
    return {"lanes": n, "devices": devices, "rounds": rounds, "shared_net": shared, "start": start, "exit": exits,
            "up_wall_s": spread([b["up_wall_s"] for b in batches]), "host_sys_s_per_candidate": sys_per,
            "batches": batches}


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def grid(variants: list[str], lanes: list[int], cycles: int, rounds: int) -> list[Run]:
    """Every variant at every N, ``rounds`` times, interleaved (a drift of the host's load spreads
    over them all)."""
    runs = []
    for _ in range(rounds):
        for n in lanes:
            for variant in variants:
                runs.append(run(variant, n, cycles))
                report(runs[-1])
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lanes", default="1,2,4,8", help="cycles in flight at once, a comma list")
    ap.add_argument("--cycles", type=int, default=20, help="cycles per lane")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=1, help="repeat the whole grid (interleaved) this often")
    ap.add_argument("--zygote-rounds", type=int, default=5,
                    help="batches per N of real candidates forked by a real zygote (0: none)")
    ap.add_argument("--zygote-devices", default="cpu",
                    help="one zygote per device, candidates spread over them (e.g. cuda:0,cuda:1,cuda:2,cuda:3)")
    ap.add_argument("--zygote-shared-net-ab", action="store_true",
                    help="zygote batches also with DRKERNEL_FORK_SHARED_NET=1, alternating with the default")
    ap.add_argument("--torch-parent", action="store_true",
                    help="then full, fork-only and one-fork from a parent with torch imported (a zygote's size)")
    ap.add_argument("--out", default="out/namespace_cost.json")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    lanes = [int(n) for n in args.lanes.split(",")]
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    runs = grid(variants, lanes, args.cycles, args.rounds)
    devices = [d for d in args.zygote_devices.split(",") if d]
    arms = (False, True) if args.zygote_shared_net_ab else (False,)
    zygote_out = zygote_runs(lanes, args.zygote_rounds, devices, arms) if args.zygote_rounds else []
    if args.torch_parent:  # the zygote imported torch: the same cycles forked from a parent of its size
        import torch  # noqa: F401

        runs += grid(["full", "fork-only", "one-fork"], lanes, args.cycles, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                               "host": platform.node(), "kernel": platform.release(), "cpus": os.cpu_count(),
                               "uid": os.getuid(), "args": vars(args), "runs": [asdict(r) for r in runs],
                               "loadavg_before": load_before, "loadavg_after": Path("/proc/loadavg").read_text().split()[:3],
                               "zygote": zygote_out},
                              indent=1))
    print(f"wrote {out}")
    return 1 if any(r.failed for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
