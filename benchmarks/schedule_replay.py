"""Replay a sustained run's measured stage durations against the real scheduling, on CPU, in seconds.

The device is scarce; the scheduling (who holds the device when) is not device work. This replays the
evaluations of a ``sustained_load.json`` (`benchmarks/sustained_load.py`) through the real runtime:
`DeviceRuntime`'s slots and judge pool, `RWLock`, `WarmPool` with `WarmUpGate`, and `CandidateSession`
itself (its message order, holds, stops and waits), with a fake device: every candidate is a
`ReplayCandidate` that answers the session's messages after sleeping for what the measured candidate
spent before sending them, and every judge sleeps for its measured service time. What the scheduling
decided on the GPU (``timing_lock_wait``, ``child_wait``, judge queueing) is not replayed: it comes out.

Model (each row of the JSON is one evaluation, submitted in the measured order, ``2 x concurrency``
outstanding as in the benchmark):

* the candidate's own time before each message: ``inputs + import`` before ``solution_path``, then
  ``compile`` (building the model and its first call, as the candidate's stage clock counts it) before
  trial 0's outputs, ``correctness`` (every trial's export and the other trials' calls) over the other
  trials, ``extra_runs`` over the integrity comparisons (one per tag the integrity hook's runs send the
  judge, `RUN_TAGS`), the region (``exclusive``) before ``timing``, ``timing_samples`` over the sampled
  comparisons, less the judge's share of each (``judge_compare``);
* the judge's service time of an export: the row's ``judge_compare`` times the run's judge busy
  seconds over its summed ``judge_compare`` (the rest was queueing), shared out over its exports; the
  same for every export, on whichever judge (``--judge-routing shared`` moves requests between judges:
  a moved request that would have reused its judge's reference outputs costs a reference run more on
  the GPU, which this does not charge);
* a candidate fails at its first trial when the row is ``incorrect``, never compiles when it is a
  compile error; a warm candidate starts in ``--start-s``, the last ``--warm-share`` of it under the
  gate (CUDA context and warm-up kernel); stopping or resuming a candidate costs ``--stop-s``;
* with the compile cache (``--hit-s``), an evaluation whose solution (problem and label: one source
  each in the mix) an earlier evaluation compiled and finished compiles in ``hit-s`` seconds instead.

Sleeps stand for durations times ``--scale``; rates are given back in the run's own seconds. Stage
durations were measured under the contention of the run they come from: a schedule that packs more
work onto the device (more slots, more judges) would stretch them, so a predicted rate above the
measured one is an upper bound; nor does it model the host's CPU, which more slots share. Settings are
combined: each value of ``--concurrency``, ``--judges``, ``--judge-routing``, ``--hit-s`` and
``--region-batch`` with each of the others. A run whose recorded setting turns on an option this
replay does not know (one since removed, such as yielding the device at exports: its stages hold waits
this runtime does not have) is refused in one line (`Unreplayable`).

    PYTHONPATH=src python3 benchmarks/schedule_replay.py benchmarks/results/sustained_ab_adaptive_h100_2026-11-26.json
    PYTHONPATH=src python3 benchmarks/schedule_replay.py RUN.json --concurrency 8 12 16 --judges 2 4 --hit-s -1 0.1
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drkernel.gym.ipc import ChannelClosed, Message
from drkernel.gym.messages import (Compare, Done, Error, Extra, Op, Outputs, Signal, SolutionPath, Timing, Verdict)
from drkernel.gym.orchestrator.judge_pool import JUDGE_ROUTINGS, JudgeFreed
from drkernel.gym.orchestrator.pool import Talker, WarmPool
from drkernel.gym.orchestrator.runtime import DeviceRuntime, JudgeSlot, MemoryBudget, RWLock, Slots, WarmUpGate
from drkernel.gym.orchestrator.session import CandidateSession

TRIALS = 6  # five trials and the second size
RUN_TAGS = {"skip_own": ("skip_own", "zeros_probe"), "poisoned": ("poisoned",), "recall_same": ("recall_same",),
            "call_count_last": ("call_count_last",), "sparse_perturb": ("sparse_perturb", "sparse_perturb_2")}
"""The integrity runs that export, and the tags each sends the judge (`candidate/integrity.py`); a row's
other laps (``integrity.ordinary`` calls, ``coverage``, ``profiler_and_hidden_work``) export nothing."""
STATS = {"median_ms": 1.0, "iqr_ms": 0.01, "cv": 0.01, "mean_ms": 1.0, "min_ms": 0.99, "n": 100}
TREE = {"kind": "list", "items": []}
REPLAYED_SETTINGS = ("concurrency", "pool_size", "judges", "judge_routing", "compile_cache", "timing_rule",
                     "region_batch")
"""The recorded settings of a run (``sustained_load.json``'s ``setting``, `sustained_load.Arm`) whose
measured stages this replay takes as they are; a run with any other setting on is `Unreplayable`."""


class Unreplayable(ValueError):
    """A run measured with a setting on that the gym no longer has (nor this replay): not replayed."""


@dataclass
class Script:
    """One evaluation as its candidate and judge played it: (seconds before the message, its header), the
    judge's seconds per export, which trial fails (None: none), the exit's and the release's seconds."""

    static_s: float
    steps: list[tuple[float, dict[str, Any]]]
    judge_s: float
    fail_trial: int | None
    exit_s: float
    release_s: float
    timed: bool
    hooks: list[str] = field(default_factory=list)
    key: tuple[str, str] = ("", "")
    """The evaluation's solution (problem, label): the compile cache's scope within the mix."""
    compile_step: int | None = None
    """The step whose wait is the compile (a cache hit shortens it), None where nothing compiled."""

    def hit(self, hit_s: float) -> "Script":
        """The same evaluation with its compile served from the compile cache: ``hit_s`` in place of
        the compile stage (a repeat loads the kept binaries instead of compiling them)."""
        if self.compile_step is None:
            return self
        steps = list(self.steps)
        seconds, header = steps[self.compile_step]
        steps[self.compile_step] = (min(seconds, hit_s), header)
        return dataclasses.replace(self, steps=steps)


def script(row: dict[str, Any], judge_ratio: float) -> Script:
    """The messages of one measured evaluation (``row`` of ``sustained_load.json``), in protocol order."""
    s = row["stages"] or {}
    g = lambda k: float(s.get(k, 0.0))  # noqa: E731
    status = row["status"]
    start = g("inputs") + g("import") + g("candidate_other")
    steps: list[tuple[float, dict[str, Any]]] = [(start, SolutionPath("/solution.py").to_header())]
    if status not in ("correct", "incorrect"):  # never got to a trial's outputs
        steps += [(g("compile") + g("correctness"), Error("compile", "CompilationError", "").to_header()),
                  (0.0, Done().to_header())]
        return Script(g("static_checks"), steps, 0.0, None, g("child_exit"), g("judge_release"), False)
    correct = status == "correct"
    integrity = [tag for k in s if k.startswith("integrity.") for tag in RUN_TAGS.get(k.split(".", 1)[1], ())] \
        if correct else []
    timed = correct and g("exclusive") > 0
    samples = 2 if timed else 0
    exports = (TRIALS if correct else 1) + len(integrity) + samples
    judge = g("judge_compare") / exports
    service = judge * judge_ratio
    own = lambda total, n: max(0.0, total / n - judge) if n else 0.0  # noqa: E731
    key = (str(row["problem"]), str(row.get("label", "")))
    steps.append((g("compile"), Outputs(0, TREE).to_header()))  # build, first call and its compile
    if not correct:  # trial 0's export, its verdict a failure
        steps.append((max(0.0, g("correctness") - judge), Done().to_header()))
        return Script(g("static_checks"), steps, service, 0, g("child_exit"), g("judge_release"), False, key=key,
                      compile_step=1)
    # trial 0's export is inside ``correctness`` (the candidate's stage clock), so its judge share is too
    steps += [(max(0.0, (g("correctness") - judge * TRIALS) / (TRIALS - 1)), Outputs(i, TREE).to_header())
              for i in range(1, TRIALS)]
    # the integrity runs' own time shared evenly over their tags (the laps' own shares, their long runs
    # apart, replayed regions waiting longer still: 0.50/s against 0.62/s for this at the measured 0.985)
    steps += [(own(g("extra_runs"), len(integrity)), Compare(0, tag, TREE).to_header()) for tag in integrity]
    steps.append((0.0, Extra("integrity", {}).to_header()))
    if timed:
        steps += [(0.0, Signal(Op.LOCK).to_header()), (g("exclusive"), Timing(Op.TIMING, STATS).to_header())]
        steps += [(own(g("timing_samples"), samples), Compare("timing", f"timed_call_{k}", TREE).to_header())
                  for k in range(samples)]
    steps.append((0.0, Done().to_header()))
    return Script(g("static_checks"), steps, service, None, g("child_exit"), g("judge_release"), timed, ["integrity"],
                  key=key, compile_step=1)


class ReplayCandidate(Talker):
    """A warm candidate of the fake device: starts in ``start_s`` (its last ``warm_s`` under the pool's
    gate), then plays the `Script` its job names, sleeping before each message."""

    def __init__(self, replay: "Replay") -> None:
        self.replay = replay
        self.pid = -1
        self.private_dir = "/replay"
        self.log_path = ""
        self.start_s: float | None = None
        self.script: Script | None = None
        self.step = 0
        self.exited_at: float | None = None

    def wait_ready(self, timeout_s: float = 300.0, gate: Any = None) -> dict:
        t = time.monotonic()
        self.replay.sleep(self.replay.start_s - self.replay.warm_s)
        gate(self, time.monotonic() + timeout_s)
        self.start_s = (time.monotonic() - t) / self.replay.scale
        return {}

    def send(self, header: dict, blob: bytes = b"", fds: list[int] | None = None) -> None:
        if header.get("op") == Op.JOB:
            self.script = self.replay.script_of(header["replay"])

    def recv(self, deadline: float | None = None, max_fds: int = 0, max_blob: object = None,
             max_header: object = None) -> Message:
        """The replayed candidate's next message (``max_blob``, the real channel's cap, bounds nothing here:
        a replayed message carries no blob)."""
        if self.script is None:  # warming up under the gate: CUDA context and the warm-up kernel
            self.replay.sleep(self.replay.warm_s)
            return Message({"op": Op.READY.value})
        if self.step >= len(self.script.steps):
            raise ChannelClosed("the replayed candidate has exited")
        seconds, header = self.script.steps[self.step]
        self.step += 1
        self.replay.sleep(seconds)
        if header["op"] == Op.DONE:
            self.exited_at = time.monotonic() + self.script.exit_s * self.replay.scale
        return Message(header)

    def stop(self) -> None:
        self.replay.stops += 1
        self.replay.sleep(self.replay.stop_s)

    def resume(self) -> None:
        self.replay.sleep(self.replay.stop_s / 4)

    def alive(self) -> bool:
        return self.exited_at is None or time.monotonic() < self.exited_at

    def wait(self, timeout_s: float) -> bool:
        left = (self.exited_at or time.monotonic()) - time.monotonic()
        time.sleep(max(0.0, min(timeout_s, left)))
        return left <= timeout_s

    def kill(self) -> None:
        self.exited_at = min(self.exited_at or time.monotonic(), time.monotonic())

    returncode = 0

    def log_tail(self, n: int = 0) -> str:
        return ""

    def discard(self) -> None:
        self.kill()


class ReplayJudge:
    """A judge child of the fake device: each request takes the measured service time of its job."""

    def __init__(self, replay: "Replay") -> None:
        self.replay = replay
        self.request: dict[str, Any] = {}

    def send(self, header: dict, blob: bytes = b"", fds: list[int] | None = None) -> None:
        self.request = header

    def recv(self, deadline: float | None = None, max_header: object = None) -> Message:
        h = self.request
        sc = self.replay.scripts[int(str(h.get("job")))]
        if h.get("op") == Op.RELEASE:  # the judge that answered the job last frees its tensors
            if self.replay.last_judge.get(str(h.get("job"))) is self:
                self.replay.sleep(sc.release_s)
            return Message({"op": Op.RELEASED.value})
        self.replay.last_judge[str(h.get("job"))] = self
        self.replay.sleep(sc.judge_s)
        return Message(Verdict(h.get("trial") != sc.fail_trial or h.get("tag") is not None).to_header())

    def discard(self) -> None:
        pass


class Replay:
    """The fake device's parameters and the scripts being replayed. With ``hit_s`` (the compile cache
    on) an evaluation whose solution an earlier, finished evaluation compiled compiles in ``hit_s``."""

    def __init__(self, scripts: list[Script], scale: float, start_s: float, warm_share: float, stop_s: float,
                 hit_s: float | None = None) -> None:
        self.scripts, self.scale = scripts, scale
        self.start_s, self.warm_s, self.stop_s = start_s, start_s * warm_share, stop_s
        self.stops = 0
        self.hit_s = hit_s
        self.stored: set[tuple[str, str]] = set()  # solutions whose compiled kernels the cache keeps
        self.hits = 0
        self.last_judge: dict[str, Any] = {}  # job -> the judge that answered its last request
        self._lock = threading.Lock()

    def script_of(self, k: int) -> Script:
        """The script a candidate plays for evaluation ``k``: a cache hit's when its solution is kept."""
        sc = self.scripts[k]
        with self._lock:
            if self.hit_s is None or sc.key not in self.stored or sc.compile_step is None:
                return sc
            self.hits += 1
        return sc.hit(self.hit_s)

    def finished(self, k: int) -> None:
        """Evaluation ``k`` ended: what it compiled is kept for later ones of its solution."""
        sc = self.scripts[k]
        if self.hit_s is not None and sc.compile_step is not None:
            with self._lock:
                self.stored.add(sc.key)

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds * self.scale)


@dataclass(frozen=True)
class Setting:
    """One replayed configuration of the device's runtime (and the compile cache: ``hit_s`` or None)."""

    concurrency: int
    pool_size: int
    judges: int
    routing: str = "sticky"
    hit_s: float | None = None
    batch: tuple[int, float] | None = None

    def label(self) -> str:
        cache = "off" if self.hit_s is None else f"hit {self.hit_s:g} s"
        batch = "" if self.batch is None else f", regions batched ({self.batch[0]} or {self.batch[1]:g} s)"
        return (f"c{self.concurrency}/p{self.pool_size}/j{self.judges} {self.routing}, compile cache {cache}"
                f"{batch}")


def runtime(replay: Replay, setting: Setting) -> DeviceRuntime:
    """A `DeviceRuntime` of the fake device: its own slots, judge pool, lock and warm pool, with the fake
    children in place of processes (its constructor would start real ones)."""
    rt = DeviceRuntime.__new__(DeviceRuntime)
    concurrency, pool_size = setting.concurrency, setting.pool_size
    rt.requested, rt.hello, rt.concurrency, rt.pool_size = "cuda:0", {"device": "cuda:0"}, concurrency, pool_size
    rt.slots, rt.in_flight, rt.memory = Slots(concurrency), 0, MemoryBudget(0)
    rt.region_batch = setting.batch
    rt.rw = RWLock(setting.batch, rt.slots.park if setting.batch else None)
    rt.warm_up_gate = WarmUpGate(rt.rw)
    rt._count_lock = threading.Lock()
    rt.judge_routing, rt.judge_freed = setting.routing, JudgeFreed()
    rt.judges = [JudgeSlot(i, lambda: ReplayJudge(replay), rt.judge_freed) for i in range(setting.judges)]
    rt.pool = WarmPool("cuda:0", pool_size, {}, runner=None, gate=rt.warm_up_gate, spawn=lambda: ReplayCandidate(replay))
    return rt


def replay_run(replay: Replay, setting: Setting) -> dict[str, Any]:
    """Every script once, in order, ``2 x concurrency`` outstanding; the rate in the run's own seconds."""
    rt = runtime(replay, setting)
    concurrency, pool_size = setting.concurrency, setting.pool_size
    with rt.pool._cond:  # the measured run started with a full pool
        rt.pool._cond.wait_for(lambda: rt.pool.ready_count >= pool_size, timeout=60)
    outcomes: list[dict[str, float]] = []

    def one(k: int) -> dict[str, float]:
        sc = replay.scripts[k]
        replay.sleep(sc.static_s)
        job = {"op": Op.JOB.value, "replay": k, "trials": [{"code": "", "seed": 0}] * TRIALS, "hooks": sc.hooks, "timing": sc.timed,
               "solution": "", "roofline_ms": None, "timing_seed": 0}
        with rt.slot(0):
            out = CandidateSession(rt, job, str(k), "kernelgym", 0, 3600.0, 1 << 50).run()
        assert out.violation is None and out.done is not None, (k, out.violation, out.died)
        replay.finished(k)
        return {"timing_lock_wait": out.lock_wait_s / replay.scale, "child_wait": out.child_wait_s / replay.scale,
                "judge_compare": out.judge_s / replay.scale, "exclusive": out.exclusive_s / replay.scale}

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=2 * concurrency) as pool:
        pending: set = set()
        for k in range(len(replay.scripts)):
            while len(pending) >= 2 * concurrency:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                outcomes += [f.result() for f in done]
            pending.add(pool.submit(one, k))
        outcomes += [f.result() for f in pending]
    wall = (time.monotonic() - t0) / replay.scale
    rt.pool.close()
    sums = {k: round(sum(o[k] for o in outcomes), 2) for k in outcomes[0]}
    return {"setting": setting.label(), **dataclasses.asdict(setting), "evaluations": len(outcomes),
            "wall_s": round(wall, 2), "evals_per_s": round(len(outcomes) / wall, 3), "stage_seconds": sums,
            "compile_hits": replay.hits, "stops": replay.stops}


def load(path: Path, limit: int | None = None) -> tuple[list[Script], dict[str, Any]]:
    """The scripts of a ``sustained_load.json`` (in submission order) and the run's measured figures;
    `Unreplayable` when its recorded setting turns on one the replay does not know (`REPLAYED_SETTINGS`)."""
    run = json.loads(path.read_text())
    held = run.get("setting") or {}
    unknown = sorted(k for k, v in held.items() if v and k not in REPLAYED_SETTINGS)
    if unknown:
        raise Unreplayable(f"{path}: measured with {', '.join(unknown)} on, which the gym no longer has "
                           f"(its stages do not fit this runtime): not replayed")
    rows = sorted(run["rows"], key=lambda r: r["submitted_s"])[:limit]
    compare = sum((r["stages"] or {}).get("judge_compare", 0.0) for r in run["rows"]) or 1.0
    busy = sum(run["device"].get("judge_busy_s") or [compare])
    scripts = [script(r, min(1.0, busy / compare)) for r in rows]
    batch = held.get("region_batch")
    measured = {"evals_per_s": run["evals_per_s"], "concurrency": run["args"]["concurrency"],
                "pool_size": run["args"]["pool_size"], "judges": run["device"].get("judges", 2),
                "judge_routing": held.get("judge_routing", "sticky"),
                "region_batch": (int(batch[0]), float(batch[1])) if batch and batch[0] else None,
                "stage_seconds": {k: round(v, 2) for k, v in run["stage_seconds"].items()
                                  if k in ("timing_lock_wait", "child_wait")}}
    return scripts, measured


def settings(args: argparse.Namespace, measured: dict[str, Any]) -> list[Setting]:
    """Every combination of the settings asked for (a pool as large as the slots unless one is named)."""
    out = []
    batches = [None] + [(int(k), float(t)) for k, t in args.region_batch or []]
    for c, j, routing, hit, batch in itertools.product(args.concurrency or [measured["concurrency"]],
                                                       args.judges or [measured["judges"]], args.judge_routing,
                                                       args.hit_s or [None], batches if args.region_batch else [None]):
        pool = args.pool_size or (c if args.concurrency else measured["pool_size"])
        out.append(Setting(c, pool, j, routing, None if hit is None or hit < 0 else hit, batch))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a sustained_load.json")
    ap.add_argument("--scale", type=float, default=0.25, help="seconds slept per measured second")
    ap.add_argument("--limit", type=int, default=None, help="replay only the first N evaluations")
    ap.add_argument("--concurrency", type=int, nargs="+", default=None,
                    help="slots per device, one replay per value (default: the run's)")
    ap.add_argument("--pool-size", type=int, default=None,
                    help="default: the run's, or as many as the slots where --concurrency is given")
    ap.add_argument("--judges", type=int, nargs="+", default=None, help="judges per device (default: the run's)")
    ap.add_argument("--judge-routing", nargs="+", choices=JUDGE_ROUTINGS, default=["sticky"],
                    help="InProcessEvaluator(judge_routing=): sticky, shared")
    ap.add_argument("--hit-s", type=float, nargs="+", default=None,
                    help="the compile cache on: a repeated solution's compile takes this long (a negative value: "
                         "the cache off, to replay both in one call)")
    ap.add_argument("--region-batch", nargs=2, action="append", metavar=("K", "T"),
                    help="InProcessEvaluator(region_batch=(K, T)); each one replayed beside the unbatched scheduling")
    ap.add_argument("--start-s", type=float, default=1.0, help="a forked candidate's start (measured: 1.04 s)")
    ap.add_argument("--warm-share", type=float, default=0.6, help="the share of the start under the gate")
    ap.add_argument("--stop-s", type=float, default=0.004, help="stopping one candidate's process tree")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    args = ap.parse_args()
    try:
        scripts, measured = load(args.run, args.limit)
    except Unreplayable as e:
        sys.exit(f"schedule_replay: {e}")
    print(f"measured: {measured}", flush=True)
    grid = settings(args, measured)
    results = []
    for _ in range(args.repeat):
        for setting in grid:
            replay = Replay(scripts, args.scale, args.start_s, args.warm_share, args.stop_s, setting.hit_s)
            r = replay_run(replay, setting)
            print(f"SUMMARY replay {setting.label()}: {r}", flush=True)
            results.append(r)
    if args.out:
        args.out.write_text(json.dumps({"run": str(args.run), "measured": measured, "args": {
            k: str(v) for k, v in vars(args).items()}, "results": results}, indent=1))
    for setting in grid:
        rates = [r["evals_per_s"] for r in results if r["setting"] == setting.label()]
        print(f"SUMMARY replay {setting.label()} evaluations/s: median {statistics.median(rates):.3f} of {rates}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
