"""What one evaluation costs, stage by stage, and how stable its speedup is (GPU; CPU for a smoke run).

For KernelBench problems at full size with our Triton solutions (tests/gym/solutions), one cold
evaluation with all stages (5 correctness trials, 10 warm-up and 100 timed calls per side, the
reference timed afresh): wall time, the stage breakdown, and the target

    wall <= max(KernelBench's own evaluator time / 10, 1.5 x GPU time of the correctness and timed calls)

where the GPU time is (trials + timed calls) x (reference median + solution median). Then the
same solution evaluated 10 times, each in a fresh candidate, with the reference re-timed each time
(cache off) and with the cached reference: the coefficient of variation of the speedup (target
<= 0.5 %). Prints a table and writes ``$OUT/gym_eval_cost.json``. Needs only torch, triton, numpy.

    PYTHONPATH=src python3 benchmarks/gym_eval_cost.py [--device cpu --quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator
from drkernel.problems import find_problem, load_rows

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "tests" / "data" / "kernelbench_level1_level2.jsonl"
SOLUTIONS = REPO / "tests" / "gym" / "solutions"
# KernelBench's own evaluator on an H200, one evaluation with all stages (seconds).
KERNELBENCH_S = {"19_ReLU": 61.0, "23_Softmax": 67.0, "12_Gemm_Multiply_LeakyReLU": 7.7}
CASES = {
    "19_ReLU": "relu_19.py",
    "23_Softmax": "softmax_23.py",
    "12_Gemm_Multiply_LeakyReLU": "gemm_multiply_leakyrelu_12.py",
    "40_LayerNorm": "layernorm_40.py",
    "47_Sum_reduction_over_a_dimension": "sum_reduction_47.py",
    "9_Matmul_Subtract_Multiply_ReLU": "matmul_subtract_multiply_relu_9.py",
}
STAGES = ("child_wait", "child_start", "prepare", "inputs", "import", "compile", "correctness", "extra_runs",
          "timing", "timing_samples", "reference_lock_wait", "reference_timing", "candidate", "child_exit",
          "judge_release")
SETTLE_S = 60.0


def gpu_seconds(r, cfg: EvalConfig) -> float | None:
    if r.ref_timing is None or r.sol_timing is None:
        return None
    return (cfg.trials + cfg.timed_calls) * (r.ref_timing.median_ms + r.sol_timing.median_ms) / 1e3


def cv(xs: list[float]) -> float | None:
    return statistics.pstdev(xs) / statistics.mean(xs) if len(xs) > 1 and statistics.mean(xs) else None


def one(ev: InProcessEvaluator, problem, source: str, cfg: EvalConfig) -> dict:
    t = time.monotonic()
    try:
        r = ev.evaluate(EvalRequest(problem=problem, solution=source, config=cfg))
    except Exception as e:  # reported as a row, so one failure does not hide the other numbers
        return {"problem": problem.name, "status": f"raised {type(e).__name__}", "wall_s": time.monotonic() - t,
                "gpu_s": None, "speedup": None, "ref_ms": None, "sol_ms": None, "sol_cv": None,
                "reference_cached": None, "stages": {}, "error": str(e)[-600:], "kernels": []}
    wall = time.monotonic() - t
    gpu = gpu_seconds(r, cfg)
    row = {"problem": problem.name, "status": r.status.value, "wall_s": wall, "gpu_s": gpu,
           "speedup": r.speedup, "ref_ms": r.ref_timing.median_ms if r.ref_timing else None,
           "sol_ms": r.sol_timing.median_ms if r.sol_timing else None,
           "sol_cv": r.sol_timing.cv if r.sol_timing else None, "reference_cached": r.reference_cached,
           "sol_timing": r.sol_timing.__dict__ if r.sol_timing else None,
           "ref_timing": r.ref_timing.__dict__ if r.ref_timing else None,
           "stages": r.stage_seconds, "error": (r.error or "")[-600:], "kernels": [k.__dict__ for k in r.kernels]}
    if problem.name in KERNELBENCH_S and gpu is not None:
        row["target_s"] = max(KERNELBENCH_S[problem.name] / 10, 1.5 * gpu)
        row["meets_target"] = wall <= row["target_s"]
    return row


def _med(xs) -> float:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def settle(ev: InProcessEvaluator) -> float:
    """Wait until the warm pool is full again, so an evaluation does not share the device with
    candidates starting (their CUDA context is created under the device's shared lock)."""
    t = time.monotonic()
    while ev.device_info()["pool_ready"] < ev.pool_size and time.monotonic() - t < SETTLE_S:
        time.sleep(0.1)
    return time.monotonic() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="one problem, 2 repeats, small CPU sizes (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated problem names (default: all cases)")
    args = ap.parse_args()
    problems = load_rows(ROWS)
    cases = dict(list(CASES.items())[:1]) if args.quick else CASES
    if args.only:
        cases = {k: v for k, v in cases.items() if k in args.only.split(",")}
    repeats = 2 if args.quick else args.repeats
    cfg = EvalConfig(device=args.device, second_size=False, cpu_element_budget=1 << 14 if args.quick else 1 << 18)
    report: dict = {"device": None, "startup_s": None, "cold": [], "repeats": {}}
    t = time.monotonic()
    # One candidate at a time: full-size level-1 problems hold tens of GB per process.
    with InProcessEvaluator(device=args.device, concurrency=1, pool_size=2, cache_reference_timings=False) as ev:
        info = ev.device_info()
        report["device"], report["startup_s"] = info["name"], time.monotonic() - t
        print(f"device: {info['name']}  versions: {info['versions']}  evaluator start: {report['startup_s']:.1f} s")
        print("\n--- one evaluation with all stages per problem (5 trials, 100 timed calls per side, reference "
              "timed afresh); 'first' compiles the kernel into an empty cache, 'steady' finds it cached ---")
        print(f"{'problem':36} {'run':6} {'status':9} {'wall s':>7} {'gpu s':>7} {'target':>7} {'ok':>3} "
              f"{'speedup':>8}  stages (s)")
        for name, f in cases.items():
            for run in ("first", "steady"):
                settled = settle(ev) if run == "steady" else 0.0
                row = one(ev, find_problem(problems, name), (SOLUTIONS / f).read_text(), cfg)
                row["settle_s"] = settled
                row["run"] = run
                report["cold"].append(row)
                stages = " ".join(f"{k}={row['stages'][k]:.2f}" for k in STAGES if k in row["stages"])
                stages += "  [" + " ".join(f"{k.split('.', 1)[1]}={v:.2f}" for k, v in row["stages"].items()
                                           if k.startswith("integrity.")) + "]"
                print(f"{name:36} {run:6} {row['status']:9} {row['wall_s']:7.2f} {row['gpu_s'] or 0:7.2f} "
                      f"{row.get('target_s', float('nan')):7.2f} {'yes' if row.get('meets_target') else '-':>3} "
                      f"{row['speedup'] or 0:8.3f}  {stages}")
                if row["error"]:
                    print(f"    error: {row['error'].splitlines()[-1]}")
        for label, cached in (("reference re-timed each time", False), ("reference cached", True)):
            ev.cache_reference_timings = cached
            print(f"\n--- the same solution {repeats}x in fresh candidates, {label} ---")
            for name, f in list(cases.items())[:3]:
                problem, source = find_problem(problems, name), (SOLUTIONS / f).read_text()
                rows = [one(ev, problem, source, cfg) for _ in range(repeats)]  # candidates start meanwhile
                speedups = [r["speedup"] for r in rows if r["speedup"]]
                walls = [r["wall_s"] for r in rows]
                c = cv(speedups)
                report["repeats"].setdefault(label, {})[name] = {
                    "speedups": speedups, "speedup_cv": c, "wall_s": walls,
                    "sol_ms": [r["sol_ms"] for r in rows], "ref_ms": [r["ref_ms"] for r in rows]}
                sol = [r["sol_timing"] or {} for r in rows]
                print(f"{name:36} speedup mean {statistics.mean(speedups) if speedups else 0:.4f}  "
                      f"cv {(c or 0) * 100:.3f}% (target <= 0.5%)  wall median {statistics.median(walls):.2f} s  "
                      f"sol per-call cv {_med(s.get('cv') for s in sol) * 100:.2f}%  head start "
                      f"{_med(s.get('head_start_ms') for s in sol):.3f} ms  host {_med(s.get('host_ms') for s in sol):.3f} ms")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gym_eval_cost.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"\nwrote {out / 'gym_eval_cost.json'}")
    bad = [r["problem"] for r in report["cold"] if r["status"] != "correct"]
    if bad:
        print(f"FAIL: not correct: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
