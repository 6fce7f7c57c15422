"""What the OS sandbox adds (`drkernel.gym.orchestrator.sandbox`): sandbox on vs off, side by side in one run.

1. Candidate start: a fresh candidate child (boot, torch and triton imported, device initialised,
   warm-up kernel) until ``ready``, alternating bwrap and no sandbox.
2. Evaluation: the same small solution evaluated back to back by two gyms (one sandboxed, one with
   ``unsafe_no_sandbox``), alternating, each evaluation in a fresh candidate from a warm pool of
   one: the wall time per evaluation (``EvalResult.elapsed_s``) and the candidate's stages.
3. Triton cache: the sandbox gives every candidate a private cache, so a solution evaluated twice
   compiles twice; without it, a shared ``triton_cache_dir`` lets the second evaluation hit the
   cache. The ``compile`` stage (first trial: compile + first call) of the repeat, both ways.

Target (issue 12): the sandbox adds at most 10 % to the back-to-back wall time per evaluation on the
GPU. Prints a summary (SUMMARY lines) and writes JSON. Needs torch, triton, numpy, bubblewrap.

    PYTHONPATH=src python3 benchmarks/sandbox_overhead.py [--device cpu] [--rounds 5] [--out out/sandbox_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator
from drkernel.gym.orchestrator.pool import Child
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.gym.orchestrator.zygote import Zygote
from drkernel.problems import find_problem, load_rows

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "tests" / "data" / "kernelbench_level1_level2.jsonl"
PROBLEM, SOLUTION = "19_ReLU", REPO / "tests" / "gym" / "solutions" / "relu_19.py"


def candidate_starts(device: str, rounds: int) -> dict[str, list[float]]:
    """Seconds from spawn to ``ready`` of fresh candidates, sandboxed and not, and of candidates
    forked by the sandboxed zygote (issue 14), interleaved."""
    runners = {"sandbox": make_runner(), "none": make_runner(unsafe_no_sandbox=True)}
    zygote = Zygote(device, {}, runners["sandbox"])
    spawn = {"sandbox": lambda: Child("drkernel.gym.candidate", device, {}, runners["sandbox"]),
             "none": lambda: Child("drkernel.gym.candidate", device, {}, runners["none"]),
             "zygote_fork": zygote.fork}
    out: dict[str, list[float]] = {k: [] for k in spawn}
    try:
        for _ in range(rounds):
            for name, make in spawn.items():
                child = make()
                try:
                    child.wait_ready()
                    out[name].append(child.start_s)
                finally:
                    child.discard()
    finally:
        zygote.close()
    return out


def evaluations(device: str, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """Back-to-back evaluations of one solution by a sandboxed and an unsandboxed gym, alternating."""
    problem = find_problem(load_rows(ROWS), PROBLEM)
    cfg = EvalConfig(device=device, second_size=False, cpu_element_budget=1 << 16)
    req = EvalRequest(problem=problem, solution=SOLUTION.read_text(), config=cfg)
    out: dict[str, list[dict[str, Any]]] = {"sandbox": [], "none": [], "sandbox_zygote": []}
    # the sandbox's own cost: fresh candidates on both sides; the zygote's forks as a third column
    with InProcessEvaluator(device=device, concurrency=1, pool_size=1, zygote=False) as on, \
            InProcessEvaluator(device=device, concurrency=1, pool_size=1, unsafe_no_sandbox=True) as off, \
            InProcessEvaluator(device=device, concurrency=1, pool_size=1) as forked:
        for ev in (on, off, forked):  # warm: judge started, reference prepared (and timed once on the GPU)
            ev.evaluate(req)
        for _ in range(rounds):
            for name, ev in (("sandbox", on), ("none", off), ("sandbox_zygote", forked)):
                _wait_pool(ev)
                r = ev.evaluate(req)
                out[name].append({"status": r.status.value, "elapsed_s": r.elapsed_s, "stages": r.stage_seconds,
                                  "warnings": r.warnings})
    return out


def _wait_pool(ev: InProcessEvaluator) -> None:
    """Start each evaluation with a warm candidate ready, as in steady back-to-back use."""
    rt = ev._runtime(ev.default_device)
    deadline = time.monotonic() + 300
    while rt.pool is not None and rt.pool.ready_count < 1 and time.monotonic() < deadline:
        time.sleep(0.05)


def triton_cache(device: str) -> dict[str, Any]:
    """The compile stage of a repeated evaluation: private caches (sandbox) vs one shared cache."""
    problem = find_problem(load_rows(ROWS), PROBLEM)
    cfg = EvalConfig(device=device, second_size=False, cpu_element_budget=1 << 16, timing=False)
    req = EvalRequest(problem=problem, solution=SOLUTION.read_text(), config=cfg)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="drkernel-shared-cache-") as shared:
        for name, kwargs in (("sandbox_private", {}),
                             ("none_shared", {"unsafe_no_sandbox": True, "triton_cache_dir": shared})):
            with InProcessEvaluator(device=device, concurrency=1, pool_size=1, **kwargs) as ev:
                first, second = ev.evaluate(req), ev.evaluate(req)
            out[name] = {"first_compile_s": first.stage_seconds.get("compile"),
                         "repeat_compile_s": second.stage_seconds.get("compile")}
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "mean": statistics.fmean(values), "min": min(values),
            "max": max(values), "n": len(values)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "out"), "sandbox_overhead.json"))
    args = ap.parse_args()
    t0 = time.monotonic()
    starts = candidate_starts(args.device, args.rounds)
    evals = evaluations(args.device, args.rounds)
    cache = triton_cache(args.device)
    start_s = {k: summary(v) for k, v in starts.items()}
    wall_s = {k: summary([e["elapsed_s"] for e in v]) for k, v in evals.items()}
    statuses = {k: sorted({e["status"] for e in v}) for k, v in evals.items()}
    fallback = any("copied through the host" in w for e in evals["sandbox"] for w in e["warnings"])
    overhead = wall_s["sandbox"]["median"] / wall_s["none"]["median"] - 1
    report = {"device": args.device, "rounds": args.rounds, "candidate_start_s": start_s, "eval_wall_s": wall_s,
              "eval_statuses": statuses, "sandbox_ipc_fell_back_to_host": fallback,
              "eval_overhead": overhead, "triton_cache": cache, "raw": {"starts": starts, "evals": evals},
              "seconds": time.monotonic() - t0}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    for k in start_s:
        print(f"SUMMARY candidate start ({k}): median {start_s[k]['median']:.3f} s over {start_s[k]['n']}")
    for k in wall_s:
        print(f"SUMMARY evaluation wall ({k}): median {wall_s[k]['median']:.3f} s, mean {wall_s[k]['mean']:.3f} s, "
              f"statuses {statuses[k]}")
    print(f"SUMMARY sandbox overhead per evaluation: {100 * overhead:+.1f} % (target <= +10 % on the GPU); "
          f"outputs through the host instead of the staging buffer: {fallback}")
    for k, v in cache.items():
        print(f"SUMMARY triton cache ({k}): compile stage first {v['first_compile_s']} s, "
              f"repeat {v['repeat_compile_s']} s")
    print(f"wrote {args.out}")
    ok = all(s == ["correct"] for s in statuses.values())
    print("PASS sandbox overhead" if ok else "FAIL sandbox overhead: an evaluation was not correct")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
