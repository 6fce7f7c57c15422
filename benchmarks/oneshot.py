"""The one-shot path (`drkernel gym eval`) and back-to-back evaluations at full size (issue 14).

For each of KernelBench 19_ReLU, 23_Softmax and 12_Gemm_Multiply_LeakyReLU with our Triton solution:
1. one-shot: a new `InProcessEvaluator(pool_size=0)` (judge and zygote started side by side, as
   `drkernel gym eval` does), one evaluation, closed; the wall from start to close, and the
   device memory the gym's processes held at their peak (nvidia-smi, 100 ms samples);
2. back to back: one evaluator with a warm pool of 2, the same solution ``--repeats`` times; the wall
   per evaluation (median) and the speedup CV; with ``--compile-cache``, again beside it with the
   compile cache on (`drkernel.gym.compile_cache`: a repeat loads what the first evaluation compiled),
   the median ``compile`` stage of both.
3. with ``--kernelbench DIR`` (the copy `scripts/kernelbench_vendor.sh` makes), after ours for each case
   in the same run: KernelBench's own evaluator on the same problem and solution, one evaluation in a fresh
   process (`benchmarks/kernelbench_yardstick.py`), its wall as ``kernelbench_s``; the ratios are taken
   against it.
   Without it the ratios are taken against KernelBench's walls measured on an H100 on 2026-11-24 (a fresh
   process per evaluation), quoted as ``kernelbench_quoted_s``: 93.5 s, 98.8 s, 10.0 s.

    PYTHONPATH=src python3 benchmarks/oneshot.py [--device cuda:0] [--repeats 4] [--kernelbench .kernelbench]
        [--out out/oneshot.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kernelbench_yardstick import YardstickError, missing_packages, vendored
from kernelbench_yardstick import evaluate as kernelbench_evaluate

from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator
from drkernel.problems import find_problem, load_rows

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "tests" / "data" / "kernelbench_level1_level2.jsonl"
SOLUTIONS = REPO / "tests" / "gym" / "solutions"
CASES = {"19_ReLU": ("relu_19.py", 93.5), "23_Softmax": ("softmax_23.py", 98.8),
         "12_Gemm_Multiply_LeakyReLU": ("gemm_multiply_leakyrelu_12.py", 10.0)}


class MemoryPeak:
    """Peak device memory used (MiB, whole GPU) while the block runs, from nvidia-smi."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            try:
                out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                     capture_output=True, text=True, timeout=5).stdout
                self.peak = max(self.peak, int(out.split()[0]))
            except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
                return

    def __enter__(self) -> "MemoryPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def back_to_back(req: EvalRequest, device: str, repeats: int, cache: str | None) -> list:
    """``repeats`` evaluations of one request on one warm evaluator (its first, warming, not counted)."""
    with InProcessEvaluator(device=device, concurrency=1, pool_size=2, compile_cache_dir=cache) as ev:
        ev.evaluate(req)  # warm: judge, problem prepared, reference timed (and, cached, the kernels kept)
        return [ev.evaluate(req) for _ in range(repeats)]


def compile_ab(plain: list, cached: list) -> dict:
    """The median ``compile`` stage and wall without and with the compile cache; SUMMARY line."""
    med = lambda rs, k: statistics.median((x.stage_seconds or {}).get(k, 0.0) for x in rs)  # noqa: E731
    row = {"compile_s": [med(plain, "compile"), med(cached, "compile")],
           "wall_s": [statistics.median(x.elapsed_s for x in plain), statistics.median(x.elapsed_s for x in cached)],
           "speedups": [[x.speedup for x in plain], [x.speedup for x in cached]]}
    print(f"SUMMARY compile_cache: compile {row['compile_s'][0]:.3f} s -> {row['compile_s'][1]:.3f} s, "
          f"wall {row['wall_s'][0]:.2f} s -> {row['wall_s'][1]:.2f} s", flush=True)
    return row


def kernelbench_row(kb_dir: str, req: EvalRequest, device: str) -> dict:
    """KernelBench's evaluator on the same problem and solution, one evaluation in a fresh process."""
    out = kernelbench_evaluate(kb_dir, req.problem.code, req.solution, device=device)
    verdict = out.status if out.status != "ok" else (
        "correct" if out.correctness else "incorrect" if out.compiled else "not compiled")
    if not out.comparable:
        print(f"WARN KernelBench's evaluator: {req.problem.name} {verdict}, so its wall is no whole "
              f"evaluation: {json.dumps(out.metadata)[:500]}", flush=True)
    return {"kernelbench_s": out.wall_s,
            "kernelbench": {"verdict": verdict, "comparable": out.comparable, "runtime_ms": out.runtime_ms,
                            "ref_runtime_ms": out.ref_runtime_ms, "import_s": out.import_s,
                            "evaluate_s": out.evaluate_s, "stand_ins": list(out.stand_ins),
                            "commit": out.kernelbench_commit, "metadata": out.metadata,
                            "log_tail": out.log_tail}}


def run_case(name: str, req: EvalRequest, quoted_s: float, args: argparse.Namespace, report: dict) -> bool:
    """One case: ours one-shot and back to back, then (``--kernelbench``) KernelBench's; row and SUMMARY."""
    t = time.monotonic()
    with MemoryPeak() as mem:
        with InProcessEvaluator(device=args.device, concurrency=1, pool_size=0) as ev:
            r = ev.evaluate(req)
    one_s = time.monotonic() - t
    reps = back_to_back(req, args.device, args.repeats, None)
    ok = True
    if args.compile_cache:
        with tempfile.TemporaryDirectory() as cache:
            cached = back_to_back(req, args.device, args.repeats, cache)
        report.setdefault("compile_cache", {})[name] = compile_ab(reps, cached)
        ok &= sorted({x.status.value for x in cached}) == ["correct"]
    walls = [x.elapsed_s for x in reps]
    stages = {k: statistics.median((x.stage_seconds or {}).get(k, 0.0) for x in reps)
              for k in sorted({k for x in reps for k in (x.stage_seconds or {})})}
    speedups = [x.speedup for x in reps if x.speedup]
    cv = statistics.pstdev(speedups) / statistics.fmean(speedups) if len(speedups) > 1 else None
    b2b = statistics.median(walls)
    kb = kernelbench_row(args.kernelbench, req, args.device) if args.kernelbench else {"kernelbench_s": None}
    kb_s = kb["kernelbench_s"] or quoted_s
    row = {"oneshot_status": r.status.value, "oneshot_s": one_s, "oneshot_peak_mib": mem.peak,
           **kb, "kernelbench_quoted_s": quoted_s,
           "ratios_against": "measured" if kb["kernelbench_s"] else "quoted",
           "oneshot_ratio_to_kernelbench": kb_s / one_s, "oneshot_faster_than_kernelbench": one_s < kb_s,
           "b2b_statuses": sorted({x.status.value for x in reps}), "b2b_wall_s": walls, "b2b_median_s": b2b,
           "b2b_ratio_to_kernelbench": kb_s / b2b, "speedup_cv": cv, "speedups": speedups,
           "oneshot_stages": r.stage_seconds, "oneshot_evaluation_s": r.elapsed_s,
           "b2b_median_stages": {k: round(v, 4) for k, v in stages.items() if v >= 0.005}}
    report["cases"][name] = row
    kb_said = (f"KernelBench measured {kb_s:.1f} s ({kb['kernelbench']['verdict']}), quoted {quoted_s} s"
               if kb["kernelbench_s"] else f"KernelBench quoted {quoted_s} s")
    print(f"SUMMARY {name}: one-shot {r.status.value} in {one_s:.1f} s = {kb_s / one_s:.1f}x below "
          f"KernelBench ({kb_said}), peak {mem.peak} MiB; back to back median {b2b:.2f} s = "
          f"{kb_s / b2b:.0f}x below KernelBench, speedup CV {100 * (cv or 0):.2f} %", flush=True)
    print(f"  one-shot: evaluator start {one_s - r.elapsed_s:.1f} s, evaluation {r.elapsed_s:.1f} s, stages "
          f"{ {k: round(v, 2) for k, v in (r.stage_seconds or {}).items() if v >= 0.05} }", flush=True)
    print(f"  back to back, median stages: {row['b2b_median_stages']}", flush=True)
    return ok and r.status.value == "correct" and row["b2b_statuses"] == ["correct"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "out"), "oneshot.json"))
    ap.add_argument("--compile-cache", action="store_true", help="back to back again with the compile cache on")
    ap.add_argument("--kernelbench", metavar="DIR",
                    help="KernelBench's evaluator (scripts/kernelbench_vendor.sh): each case evaluated by it "
                    "too, after ours, in a fresh process")
    ap.add_argument("--cases", default=",".join(CASES), help="which of the cases, comma-separated")
    args = ap.parse_args()
    unknown = set(args.cases.split(",")) - set(CASES)
    if unknown:
        ap.error(f"--cases: unknown {', '.join(sorted(unknown))}; known: {', '.join(CASES)}")
    if args.kernelbench:  # before minutes of our own runs: a missing copy or package fails here, loudly
        vendored(args.kernelbench)
        if missing_packages():
            raise YardstickError(f"KernelBench's evaluator needs {', '.join(missing_packages())}")
    rows = load_rows(ROWS)
    cfg = EvalConfig(device=args.device)
    report: dict = {"device": args.device, "cases": {},
                    "kernelbench_order": "after ours, per case" if args.kernelbench else None}
    ok = True
    for name, (sol, quoted_s) in CASES.items():
        if name not in args.cases.split(","):
            continue
        req = EvalRequest(problem=find_problem(rows, name), solution=(SOLUTIONS / sol).read_text(), config=cfg)
        ok &= run_case(name, req, quoted_s, args, report)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print("PASS oneshot" if ok else "FAIL oneshot: an evaluation was not correct")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
