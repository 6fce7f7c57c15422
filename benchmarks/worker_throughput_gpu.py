"""GPU throughput of the service's worker layer against one-at-a-time evaluation in fresh processes.

Plain Python (standard library + the gym's torch/triton): the GPU host has no web stack, so this
drives the service's worker layer directly, i.e. the SQLite job store, the scheduler and one
`LocalWorker` process holding the gym's `InProcessEvaluator` (judge, warm candidate pool, device
reader-writer lock; timing on, so every timed region holds the device exclusively).

Workload: the gold solutions of the built-in level-1 and level-2 problems, each evaluated ``--reps``
times with a different seed (distinct content hashes, so the result cache never answers).
Baseline: a sample of the same requests, each in a fresh ``python`` process running a one-shot
evaluator (``concurrency=1, pool_size=0``), one at a time.
Repeatability: per problem, the coefficient of variation of the speedup over the repetitions, in
both modes; the pool must not make it worse.

    PYTHONPATH=src python benchmarks/worker_throughput_gpu.py --device cuda:0

Each mode has a wall-clock budget (``--pool-budget-s``, ``--fresh-budget-s``; defaults keep the
script near 8 minutes at most on an H100): rates count only the evaluations finished within it, and
fresh evaluations run problem by problem, so a cut leaves complete repetitions of the first problems.
Dry run without a GPU (interpreter, no timing, so no speedups or CVs):
``--device cpu --limit 3 --reps 2 --cv-problems 2 --fresh-reps 2 --slots 2 --pool-size 2``.

Prints everything and writes JSON (``--out``, default ``$OUT/worker_throughput_gpu.json`` when OUT is
set). Exit status 0 when every gold evaluation came back correct and, on a GPU, the throughput ratio
is >= 5 and repeatability holds; 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.result import EvalResult
from drkernel.problems import builtin_solution, load_builtin
from drkernel.service.config import ServiceConfig
from drkernel.service.scheduler import Scheduler, Submission
from drkernel.service.store import JobStore
from drkernel.service.workers import LocalWorker

FRESH_TIMEOUT_S = 120.0  # a fresh gold evaluation should take ~20 s on an H100 (judge and candidate start)
FRESH_SNIPPET = """
import json, sys
from drkernel.gym import InProcessEvaluator
from drkernel.gym.config import EvalRequest
request = EvalRequest.from_dict(json.load(sys.stdin))
with InProcessEvaluator(device=sys.argv[1], concurrency=1, pool_size=0) as ev:
    print(json.dumps(ev.evaluate(request).to_dict()))
"""


def request(problem, rep: int) -> EvalRequest:
    return EvalRequest(
        problem=problem,
        solution=builtin_solution(problem, "gold.py"),
        config=EvalConfig(seed=rep),
        request_id=f"{problem.name}#{rep}",
    )


async def run_pool(
    requests: list[EvalRequest], device: str, slots: int, pool_size: int, workdir: Path, budget_s: float
) -> tuple[list[EvalResult | None], float, dict]:
    """Evaluate through store + scheduler + one device worker; returns results (None: no result within
    ``budget_s``), seconds, worker view."""
    config = ServiceConfig(
        db_path=str(workdir / "bench.sqlite"),
        cache=False,
        slots_per_worker=slots,
        evaluator_kwargs={"concurrency": slots, "pool_size": pool_size},
        sqlite_synchronous="NORMAL",
        job_timeout_grace_s=600.0,
    )
    store = JobStore(config.db_path, synchronous="NORMAL")
    worker = LocalWorker("gpu0", device, config.evaluator, config.evaluator_kwargs, slots)
    scheduler = Scheduler(store, [worker], config)
    await scheduler.start()  # starts the judge and the warm pool, runs the canary
    view = scheduler.workers_view()[0]
    if view["state"] != "ready":
        await scheduler.stop()
        raise SystemExit(f"worker not ready: {view}")
    t0 = time.perf_counter()
    jobs = scheduler.submit([Submission(r) for r in requests])
    ids = [j.id for j, _ in jobs]
    done = await scheduler.wait(ids, timeout=budget_s)
    seconds = time.perf_counter() - t0
    view = scheduler.workers_view()[0]
    unfinished = sum(not done[i].status.terminal for i in ids)
    if unfinished:
        print(f"!! pool budget of {budget_s:.0f} s reached with {unfinished} job(s) unfinished (left out)")
    await scheduler.stop()
    store.close()
    results = [EvalResult.from_json(done[i].result_json) if done[i].result_json else None for i in ids]
    failed = [
        (r.request_id, done[i].status.value, done[i].error)
        for i, r in zip(ids, requests)
        if done[i].result_json is None and done[i].status.terminal
    ]
    if failed:
        print(f"!! {len(failed)} job(s) without a result: {failed[:5]}")
    view["jobs_failed"] = len(failed)
    return results, seconds, view


def run_fresh(
    requests: list[EvalRequest], device: str, budget_s: float
) -> tuple[list[EvalResult | None], float]:
    """Each request in a fresh process, one at a time, while the next one should end within ``budget_s``."""
    results, total = [], 0.0
    for r in requests:
        if results and total + total / len(results) > budget_s:
            print(f"!! fresh budget of {budget_s:.0f} s: stopped after {len(results)} of {len(requests)} evaluations")
            break
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", FRESH_SNIPPET, device],
                input=json.dumps(r.to_dict()),
                capture_output=True,
                text=True,
                timeout=FRESH_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            total += time.perf_counter() - t0
            print(f"!! fresh evaluation of {r.request_id} timed out after {FRESH_TIMEOUT_S:.0f} s")
            results.append(None)
            continue
        seconds = time.perf_counter() - t0
        total += seconds
        if proc.returncode != 0:
            print(f"!! fresh evaluation of {r.request_id} failed ({proc.returncode}): {proc.stderr[-1500:]}")
            results.append(None)
            continue
        results.append(EvalResult.from_json(proc.stdout.strip().splitlines()[-1]))
        speedup = results[-1].speedup
        print(
            f"fresh {len(results)}/{len(requests)} {r.request_id}: {results[-1].status.value} in {seconds:.1f} s"
            + (f", speedup {speedup:.3f}" if speedup is not None else ""),
            flush=True,
        )
    return results, total


def cv_by_problem(results) -> dict[str, float | None]:
    """Coefficient of variation of the speedup per problem over its repetitions."""
    by: dict[str, list[float]] = {}
    for r in results:
        if r is not None and r.speedup is not None:
            by.setdefault(r.problem_key, []).append(r.speedup)
    return {
        k: (statistics.stdev(v) / statistics.mean(v) if len(v) > 1 and statistics.mean(v) > 0 else None)
        for k, v in by.items()
    }


def plot(report: dict, path: Path) -> None:
    """Evaluations per minute of both modes, and the speedup CV per sampled problem."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [1, 2]})
    a.bar(
        ["worker pool", "fresh processes"],
        [report["pool_evals_per_min"], report["fresh_evals_per_min"]],
        color=["C0", "C1"],
    )
    a.set_ylabel("evaluations per minute")
    a.set_title(f"throughput ratio {report['throughput_ratio']:.2f}x")
    keys = sorted(set(report["cv_pool"]) | set(report["cv_fresh"]))
    xs = range(len(keys))
    for offset, mode, color in ((-0.2, "pool", "C0"), (0.2, "fresh", "C1")):
        cvs = [100 * (report[f"cv_{mode}"].get(k) or 0.0) for k in keys]
        b.bar([x + offset for x in xs], cvs, width=0.4, label=mode, color=color)
    b.set_xticks(list(xs), [k.rsplit("/", 1)[-1] for k in keys], rotation=30, ha="right")
    b.set_ylabel("speedup CV over seeds (%)")
    b.legend()
    fig.suptitle(f"service worker layer on {report['device']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--reps", type=int, default=3, help="evaluations of each gold solution in pool mode")
    ap.add_argument("--slots", type=int, default=4, help="candidates in flight on the device")
    ap.add_argument("--pool-size", type=int, default=8, help="warm candidate children")
    ap.add_argument("--cv-problems", type=int, default=4, help="problems in the fresh-process sample")
    ap.add_argument("--fresh-reps", type=int, default=3, help="fresh-process evaluations per sampled problem")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N problems (a dry run)")
    ap.add_argument("--pool-budget-s", type=float, default=240.0, help="wall-clock budget of the pool mode")
    ap.add_argument("--fresh-budget-s", type=float, default=200.0, help="wall-clock budget of the fresh mode")
    default_out = (
        Path(os.environ["OUT"]) / "worker_throughput_gpu.json"
        if os.environ.get("OUT")
        else Path(__file__).resolve().parent / "results" / "worker_throughput_gpu.json"
    )
    ap.add_argument("--out", type=Path, default=default_out)
    args = ap.parse_args()

    problems = [p for p in load_builtin([1, 2]) if "gold.py" in p.metadata.get("solutions", {})]
    problems = problems[: args.limit] if args.limit else problems
    if not problems:
        raise SystemExit("no built-in level-1/2 problems with gold solutions: is the suite installed?")
    print(
        f"device {args.device}; {len(problems)} problems "
        f"({sum(p.level == 1 for p in problems)} L1, {sum(p.level == 2 for p in problems)} L2), "
        f"{args.reps} seeds each through the worker pool",
        flush=True,
    )

    pool_requests = [request(p, rep) for rep in range(args.reps) for p in problems]
    with tempfile.TemporaryDirectory() as tmp:
        pool_results, pool_s, view = asyncio.run(
            run_pool(pool_requests, args.device, args.slots, args.pool_size, Path(tmp), args.pool_budget_s)
        )
    device_name = view["device_name"] + (" (no timing, so no speedups: a dry run)" if args.device == "cpu" else "")
    pool_done = sum(r is not None for r in pool_results)
    pool_rate = pool_done / pool_s * 60
    print(
        f"pool on {device_name}: {pool_done} of {len(pool_requests)} evaluations in {pool_s:.1f} s = {pool_rate:.1f} per minute "
        f"(worker: {view['completed']} completed, {view['infra_failures']} infra failures)",
        flush=True,
    )

    step = max(1, len(problems) // args.cv_problems)
    sample = problems[::step][: args.cv_problems]
    fresh_requests = [request(p, rep) for p in sample for rep in range(args.fresh_reps)]
    fresh_results, fresh_s = run_fresh(fresh_requests, args.device, args.fresh_budget_s)
    fresh_done = sum(r is not None for r in fresh_results)
    fresh_rate = fresh_done / fresh_s * 60 if fresh_done else 0.0
    print(f"fresh: {fresh_done} of {len(fresh_requests)} evaluations in {fresh_s:.1f} s = {fresh_rate:.1f} per minute")

    sample_keys = {p.key for p in sample}
    cv_pool = {k: v for k, v in cv_by_problem(pool_results).items() if k in sample_keys}
    cv_fresh = cv_by_problem(fresh_results)
    print(f"{'problem':40s} {'speedup CV pool':>16s} {'speedup CV fresh':>17s}")
    for k in sorted(sample_keys):
        fmt = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
        print(f"{k:40s} {fmt(cv_pool.get(k)):>16s} {fmt(cv_fresh.get(k)):>17s}")
    pool_cvs = [v for v in cv_pool.values() if v is not None]
    fresh_cvs = [v for v in cv_fresh.values() if v is not None]
    med_pool = statistics.median(pool_cvs) if pool_cvs else None
    med_fresh = statistics.median(fresh_cvs) if fresh_cvs else None
    ratio = pool_rate / fresh_rate if fresh_rate else 0.0
    repeatable = med_pool is not None and med_fresh is not None and med_pool <= 1.5 * med_fresh + 0.02
    incorrect = [r.request_id for r in (*pool_results, *fresh_results) if r is not None and not r.correct]
    timed = args.device != "cpu"
    report = {
        "date": datetime.now(timezone.utc).date().isoformat(),
        "device": device_name,
        "device_arg": args.device,
        "problems": len(problems),
        "reps": args.reps,
        "slots": args.slots,
        "pool_size": args.pool_size,
        "pool_evaluations": pool_done,
        "pool_submitted": len(pool_requests),
        "pool_seconds": round(pool_s, 2),
        "pool_evals_per_min": round(pool_rate, 2),
        "fresh_evaluations": fresh_done,
        "fresh_planned": len(fresh_requests),
        "fresh_seconds": round(fresh_s, 2),
        "fresh_evals_per_min": round(fresh_rate, 2),
        "throughput_ratio": round(ratio, 2),
        "median_speedup_cv_pool": med_pool,
        "median_speedup_cv_fresh": med_fresh,
        "cv_pool": cv_pool,
        "cv_fresh": cv_fresh,
        "gold_not_correct": incorrect,
        "speedups_pool": {r.request_id: r.speedup for r in pool_results if r is not None},
        "speedups_fresh": {r.request_id: r.speedup for r in fresh_results if r is not None},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    plot(report, args.out.with_suffix(".png"))
    fmt = lambda x: "n/a" if x is None else f"{100 * x:.2f} %"  # noqa: E731
    print(
        f"SUMMARY pool {pool_rate:.1f} evals/min vs fresh {fresh_rate:.1f} evals/min: ratio {ratio:.2f}x "
        f"(target >= 5); median speedup CV pool {fmt(med_pool)} vs fresh {fmt(med_fresh)} "
        f"({'not worse' if repeatable else 'WORSE' if timed else 'not timed on cpu'}); "
        f"gold not correct: {incorrect or 'none'}"
    )
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    ran = view["jobs_failed"] == 0 and fresh_done == len(fresh_results) > 0
    ok = ran and not incorrect and (not timed or (ratio >= 5 and repeatable))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
