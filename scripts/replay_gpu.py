"""GPU check `replay`: a bench run of the built-in suite (its built-in solutions), replayed in a second
process, agreement printed; then one record with a deliberately changed provenance field (TF32 on in
the reference's flags) replayed, which must be named; the golds' sol_fraction per problem.

Usage: PYTHONPATH=src python3 scripts/replay_gpu.py --out out [--device cuda:0] [--limit N]
Prints PASS/FAIL lines; writes OUT/replay.json and the run folder OUT/replay_run (report with the
sol_fraction plot). Exit 1 on any FAIL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

TAMPERED = "cuda.matmul.allow_tf32"


def bench(run_dir: Path, device: str, limit: int) -> None:
    """The first process: the built-in suite through `run_bench`, scripted with its built-in solutions."""
    from drkernel.agent.policies.spec import make_policy
    from drkernel.bench.report import write_report
    from drkernel.bench.run import BenchConfig, run_bench
    from drkernel.gym import InProcessEvaluator
    from drkernel.problems.loaders import load_problems

    config = BenchConfig.from_dict({"problems": "builtin", "policy": "scripted:builtin", "samples": 1, "turns": 1,
                                    "eval": {"device": device}, **({"limit": limit} if limit else {})})
    problems = load_problems("builtin")
    with InProcessEvaluator(device=device, concurrency=4, pool_size=4) as evaluator:
        asyncio.run(run_bench(config, problems, make_policy(config.policy, problems), evaluator, run_dir))
    try:
        write_report(run_dir)
    except ImportError as e:  # matplotlib is not on every GPU host: the numbers still print below
        print(f"no report plots: {e}")


def replay_in_child(target: Path, device: str) -> list[dict]:
    """The second process: `drkernel.gym.replay` on ``target``; its agreements as dicts."""
    code = ("import asyncio, faulthandler, json, sys\n"
            "faulthandler.enable()\n"
            "from drkernel.gym import InProcessEvaluator\n"
            "from drkernel.gym.replay import load, replay\n"
            "records = load(sys.argv[1])\n"
            "with InProcessEvaluator(device=sys.argv[2], concurrency=4, pool_size=4) as ev:\n"
            "    agreements = [a.to_dict() for a in asyncio.run(replay(records, ev))]\n"
            "print('closed', file=sys.stderr, flush=True)\n"
            "print(json.dumps(agreements), flush=True)\n")
    out = subprocess.run([sys.executable, "-c", code, str(target), device], capture_output=True, text=True)
    if out.returncode != 0:  # the traceback (faulthandler's too) says where; the agreements, if printed, still count
        print(f"replay child exited {out.returncode}; its stderr ends:\n{out.stderr[-4000:]}")
    lines = out.stdout.strip().splitlines()
    if not lines:
        raise SystemExit("the replay child printed no agreements")
    return json.loads(lines[-1])


def tampered_record(run_dir: Path, path: Path) -> bool:
    """One valid, timed record with TF32 on in its provenance's reference flags, written to ``path``."""
    from drkernel.gym.replay import load, record_json

    for rec in load(run_dir):
        prov = rec.result.provenance
        if rec.result.valid and prov is not None:
            flags = {**prov.reference_flags, TAMPERED: True}
            result = replace(rec.result, provenance=replace(prov, reference_flags=flags))
            path.write_text(json.dumps(record_json(rec.request, result)))
            return True
    return False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="out")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    run_dir = out / "replay_run"
    bench(run_dir, args.device, args.limit)
    agreements = replay_in_child(run_dir, args.device)
    timed = [a for a in agreements if a["speedup_agrees"] is not None]
    same = sum(a["same_class"] for a in agreements)
    within = sum(a["speedup_agrees"] for a in timed)
    for a in agreements:
        if not a["agrees"] or a["provenance"]:
            print(f"  {a['key']}: {a['original']} -> {a['replayed']}, speedups {a['speedups']}, "
                  f"provenance {a['provenance']}")
    ok = [("every verdict class agrees", same == len(agreements) > 0),
          ("every speedup within its interval", within == len(timed) > 0)]
    named = []
    if tampered_record(run_dir, out / "replay_tampered.json"):
        (tampered,) = replay_in_child(out / "replay_tampered.json", args.device)
        named = tampered["provenance"]
        ok.append((f"the changed {TAMPERED} is named", any(TAMPERED in d for d in named)))
    else:
        ok.append(("a valid result to tamper with", False))
    from drkernel.bench.io import read_episodes
    from drkernel.bench.report import sol_by_problem

    sol = sol_by_problem(read_episodes(run_dir / "trajectories.jsonl"))
    ok.append(("sol_fraction for the golds", bool(sol)))
    print(f"replay: {same}/{len(agreements)} same verdict class, {within}/{len(timed)} speedups within their "
          f"intervals; tampered replay names {named}")
    for key, value in sol:
        print(f"  sol_fraction {key}: {value:.3f}")
    for name, passed in ok:
        print(f"{'PASS' if passed else 'FAIL'} {name}")
    (out / "replay.json").write_text(json.dumps({"agreements": agreements, "tampered": named,
                                                 "sol_fraction": dict(sol)}, indent=1))
    return 0 if all(p for _, p in ok) else 1


if __name__ == "__main__":
    sys.exit(main())
