"""``python -m drkernel.organism run|suite|report|sft``: the organism without the CLI's dependencies
(typer, rich), for the GPU machine, which has only torch, triton, transformers and numpy.

Examples::

    python -m drkernel.organism run --arm full --seed 0 --out runs/org --device cuda
    python -m drkernel.organism suite --arms nocheck,nopr --seeds 0,1 --out runs/org --device cuda
    python -m drkernel.organism report runs/org --out runs/org/report
    python -m drkernel.organism probe --device cuda --cache runs/org/cache   # payoffs before training
    python -m drkernel.organism sft --seed 0,1,2,3 --out runs/org/cache --device cuda   # in parallel
    python -m drkernel.organism claims --seeds 8 --parallel 8 --out runs/claims --device cuda
        # the registered claims: 8 fresh seeds x nocheck,nopr,full as parallel processes, then the report
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Sequence

from drkernel.errors import ConfigError


def _scale(name: str, device: str):
    from drkernel.organism.arms import scale

    if name == "auto":
        from drkernel.devices import resolve

        name = "gpu" if resolve(device, "--device").type == "cuda" else "cpu"
    return scale(name)


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as e:
        raise ConfigError(f"expected comma-separated integers, got {text!r}") from e


def suite(arms: str, seeds: str, out: str, device: str, scale_name: str, report: bool,
          cache: str | None = None, bundle: str | None = None, budget_s: float | None = None,
          turns: str | None = None, gym_concurrency: int | None = None) -> list[str]:
    """Run the (arm, seed) pairs; return SUMMARY lines (and write the report when asked; copy the
    suite's JSON to ``bundle``, the one file a caller with a small file budget keeps)."""
    import dataclasses

    from drkernel.organism.arms import arm
    from drkernel.organism.report import write_report
    from drkernel.organism.run import run_suite

    chosen = [arm(a.strip()) for a in arms.split(",") if a.strip()]
    sc = _scale(scale_name, device)
    if budget_s is not None:  # the per-run RL guard (a section's time limit over its runs), not a plan
        sc = dataclasses.replace(sc, budget_s=budget_s)
    runs = run_suite(chosen, _ints(seeds), sc, Path(out), device,
                     Path(cache) if cache else None, Path(bundle) if bundle else None,
                     Path(turns) if turns else None, gym_concurrency)
    lines = [f"SUMMARY organism run {r['arm']} seed {r['seed']}: {r['steps_done']} steps in "
             f"{r['wall_seconds']:.0f} s; last reward {r['steps'][-1].get('gym/org/reward_mean', 0):.3f} "
             f"hack {r['steps'][-1].get('gym/org/hack_rate', 0):.2f} "
             f"lazy {r['steps'][-1].get('gym/org/lazy_rate', 0):.2f}" for r in runs if r["steps"]]
    if report:
        lines += write_report([out], Path(out) / "report")
    return lines


def sft_only(seed: int, out: str, device: str, scale_name: str) -> str:
    """SFT a policy (for ``drkernel train`` with ``task.kind: organism``); returns its folder."""
    from drkernel.organism.run import prepare_policy
    from drkernel.devices import resolve

    p0 = prepare_policy(_scale(scale_name, device), seed, Path(out), resolve(device, "--device"))
    return str(p0.path)


def sft_many(seeds: Sequence[int], out: str, device: str, scale_name: str, threads: int = 2) -> list[str]:
    """SFT several seeds at once, one process each (``sft --seed 0,1,2,3``; the claims runner has its own pool).

    The 11 M-parameter SFT is bound by the host issuing small kernels one step at a time (about 200 s
    for one seed on an H100, the GPU mostly idle), so four processes share one GPU at little cost to
    each; in one process they would add up. Each child is ``python -m drkernel.organism sft`` with
    ``threads`` intra-op threads; returns a SUMMARY line per seed (its folder or its error)."""
    import json
    import os
    import subprocess
    import time

    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    t0 = time.monotonic()
    procs = [(s, subprocess.Popen([sys.executable, "-m", "drkernel.organism", "sft", "--seed", str(s),
                                   "--out", out, "--device", device, "--scale", scale_name], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)) for s in seeds]
    lines, failed = [], []
    for seed, proc in procs:
        stdout, stderr = proc.communicate()
        folder = stdout.strip().splitlines()[-1] if proc.returncode == 0 and stdout.strip() else ""
        if not folder:
            failed.append(seed)
            lines.append(f"SUMMARY organism sft seed {seed}: FAILED (rc {proc.returncode}) "
                         f"{stderr.strip()[-800:]}")
            continue
        info = json.loads((Path(folder) / "organism_sft.json").read_text())
        lines.append(f"SUMMARY organism sft seed {seed}: {folder} loss {info['loss_first']:.2f} -> "
                     f"{info['loss_last']:.3f} in {info['seconds']:.0f} s")
    lines.append(f"SUMMARY organism sft: {len(seeds) - len(failed)}/{len(seeds)} seeds in "
                 f"{time.monotonic() - t0:.0f} s wall")
    if failed:
        raise ConfigError("\n".join(lines))
    return lines


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m drkernel.organism", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("run", "suite"):
        s = sub.add_parser(name)
        if name == "run":
            s.add_argument("--arm", default="full")
            s.add_argument("--seed", default="0")
        else:
            s.add_argument("--arms", default="nocheck,nopr,full,grpo")
            s.add_argument("--seeds", default="0,1")
        s.add_argument("--out", default="runs/org")
        s.add_argument("--device", default="auto")
        s.add_argument("--scale", default="auto", help="gpu, cpu, dry or auto (gpu when CUDA is there)")
        s.add_argument("--report", action="store_true",
                       help="also write the table and plots under OUT/report")
        s.add_argument("--cache", default=None, help="where SFT policies are kept (default OUT/cache)")
        s.add_argument("--bundle", default=None, help="also copy organism_suite.json to this path")
        s.add_argument("--budget-s", type=float, default=None,
                       help="stop a run after the step that crosses this many seconds of RL (0: none; "
                            "default: the scale's)")
        s.add_argument("--turns", default=None,
                       help="lock file of runs sharing the GPU from other processes (drkernel.organism.turns)")
        s.add_argument("--gym-concurrency", type=int, default=None,
                       help="evaluations at once per gym (default 8 on a GPU, 2 on CPU)")
    c = sub.add_parser("claims", help="the registered claims: fresh seeds, arms x seeds in parallel, report")
    c.add_argument("--seeds", type=int, default=8, help="how many seeds per arm (drawn at run time)")
    c.add_argument("--arms", default="nocheck,nopr,full")
    c.add_argument("--parallel", type=int, default=8, help="processes at once")
    c.add_argument("--out", default="runs/claims")
    c.add_argument("--device", default="auto")
    c.add_argument("--scale", default="auto")
    c.add_argument("--budget-s", type=float, default=None, help="RL seconds per run (default: the scale's)")
    c.add_argument("--cpus", type=int, default=None, help="CPU cores to share (default: all)")
    c.add_argument("--sft-only", action="store_true", help="draw the seeds and SFT them, nothing else")
    c.add_argument("--report", default=None, help="where the report goes (default OUT/report)")
    c.add_argument("--deadline-s", type=float, default=None,
                   help="start no run likely to end later than this many seconds into the call")
    c.add_argument("--run-estimate-s", type=float, default=0.0,
                   help="a run's expected wall time until one has finished (for --deadline-s)")
    c.add_argument("--gpus", type=int, default=1,
                   help="spread the seeds over this many GPUs (all arms of a seed on one; a cache per GPU)")
    c.add_argument("--plan", action="store_true",
                   help="only print what the folder's run records leave to do (runs kept, cut, to do; SFT seeds)")
    q = sub.add_parser("probe", help="what each arm would pay each writer's program (both check settings)")
    q.add_argument("--device", default="auto")
    q.add_argument("--scale", default="auto")
    q.add_argument("--cache", default="runs/org/cache", help="the suite's cache folder (verdicts are shared)")
    q.add_argument("--problems", type=int, default=8)
    q.add_argument("--out", default=None, help="also write the probe's numbers to this JSON file")
    r = sub.add_parser("report")
    r.add_argument("paths", nargs="+")
    r.add_argument("--out", default="runs/org/report")
    r.add_argument("--tail", type=int, default=3)
    f = sub.add_parser("sft")
    f.add_argument("--seed", default="0", help="a seed, or several (0,1,2,3): one process each, in parallel")
    f.add_argument("--out", default="runs/org/cache")
    f.add_argument("--device", default="auto")
    f.add_argument("--scale", default="auto")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        if args.command == "run":
            lines = suite(args.arm, args.seed, args.out, args.device, args.scale, args.report, args.cache,
                          args.bundle, args.budget_s, args.turns, args.gym_concurrency)
        elif args.command == "suite":
            lines = suite(args.arms, args.seeds, args.out, args.device, args.scale, args.report, args.cache,
                          args.bundle, args.budget_s, args.turns, args.gym_concurrency)
        elif args.command == "claims":
            from drkernel.organism.parallel import claims

            lines = claims([a.strip() for a in args.arms.split(",") if a.strip()], args.seeds,
                           _scale(args.scale, args.device).name, args.device, Path(args.out), args.parallel,
                           args.budget_s, args.cpus, args.sft_only,
                           Path(args.report) if args.report else None, args.deadline_s, args.run_estimate_s,
                           args.plan, args.gpus)
        elif args.command == "probe":
            from drkernel.organism.probe import probe

            lines = probe(_scale(args.scale, args.device), args.device, Path(args.cache), args.problems,
                          Path(args.out) if args.out else None)
            if any(line.startswith("FAIL") for line in lines):
                print("\n".join(lines))
                return 1
        elif args.command == "report":
            from drkernel.organism.report import write_report

            lines = write_report(args.paths, Path(args.out), args.tail)
        elif len(_ints(args.seed)) == 1:
            lines = [sft_only(_ints(args.seed)[0], args.out, args.device, args.scale)]  # the folder
        else:
            lines = sft_many(_ints(args.seed), args.out, args.device, args.scale)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
