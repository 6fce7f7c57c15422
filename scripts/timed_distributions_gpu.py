"""GPU check `timed-distributions`: does a speedup move with the secret distribution of the timed calls?

Each named built-in gold is evaluated once per distribution the judge allows its timed calls (the
plan's timing seed set to that distribution through `EvalRequest.seed_plan`, all else as drawn), and
the reference's and the solution's medians and the speedup are printed per distribution. A speedup
that moves by more than its interval between distributions is the inputs, not the measurement.

Usage: PYTHONPATH=src python3 scripts/timed_distributions_gpu.py --out OUT [--device cuda:0]
       [--problems softplus,silu,cumsum,matmul_square]
Writes OUT/timed_distributions.json.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path


def plans_by_distribution(evaluator, request):
    """One evaluation with a drawn plan, then the same plan with the timed calls on each allowed
    distribution: (distribution name, result) pairs."""
    from drkernel.gym.seeds import Distribution, SeedPlan, distribution_of, with_distribution

    first = evaluator.evaluate(request)
    plan = SeedPlan.from_dict(first.provenance.seeds)
    out = [(distribution_of(plan.timing).name, first)]
    for dist in Distribution:
        if dist is distribution_of(plan.timing):
            continue
        forced = replace(plan, timing=with_distribution(plan.timing, dist),
                         coverage=with_distribution(plan.coverage, dist))
        try:
            out.append((dist.name, evaluator.evaluate(replace(request, seed_plan=forced))))
        except Exception as e:  # noqa: BLE001 - a distribution the judge does not allow: say so
            print(f"  {dist.name}: not evaluated ({type(e).__name__}: {str(e)[:160]})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--problems", default="softplus,silu,cumsum,matmul_square")
    args = ap.parse_args()
    from drkernel.gym import InProcessEvaluator
    from drkernel.gym.config import EvalConfig, EvalRequest
    from drkernel.problems.loaders import builtin_solution, load_problems

    wanted = args.problems.split(",")
    problems = [p for p in load_problems("builtin") if p.name in wanted]
    rows = []
    with InProcessEvaluator(device=args.device, concurrency=1, pool_size=1) as ev:
        for problem in problems:
            request = EvalRequest(problem, builtin_solution(problem), EvalConfig(device=args.device))
            for name, r in plans_by_distribution(ev, request):
                ref = getattr(r.ref_timing, "median_ms", None)
                sol = getattr(r.sol_timing, "median_ms", None)
                row = {"problem": problem.name, "distribution": name, "status": r.status.value, "valid": r.valid,
                       "ref_ms": ref, "sol_ms": sol, "speedup": r.speedup, "speedup_ci": r.speedup_ci}
                rows.append(row)
                print(f"DIST {problem.name:16s} {name:8s} {r.status.value:10s} ref {ref} sol {sol} "
                      f"speedup {r.speedup} ci {r.speedup_ci}", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "timed_distributions.json").write_text(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
