"""`drkernel organism run|suite|claims|probe|report|sft`: the miniature Dr. Kernel (drkernel.organism).

The commands pass their options to `python -m drkernel.organism` (argparse, usable where typer and
rich are absent), after the one device check of `drkernel.cli.devices`.
"""

from __future__ import annotations

import typer

from drkernel.cli.devices import check_devices
from drkernel.cli.options import group

app = group("The organism: generated problem families, a small code-writing policy, the ablation arms.")
DEVICE_HELP = "auto, cpu, cuda or cuda:N (model and gym)"
SCALE_HELP = "gpu, cpu, dry or auto (gpu when CUDA is there)"


def _exit(argv: list[str], device: str) -> None:
    check_devices([("--device", device)])
    from drkernel.organism.__main__ import main

    code = main(argv)
    if code:
        raise typer.Exit(code)


@app.command()
def run(arm: str = typer.Option("full", help="nocheck, nopr, full or grpo"),
        seed: str = typer.Option("0", help="seed, or comma-separated seeds"),
        out: str = typer.Option("runs/org", help="output folder"),
        device: str = typer.Option("auto", help=DEVICE_HELP),
        scale: str = typer.Option("auto", help=SCALE_HELP),
        report: bool = typer.Option(False, help="also write the table and plots under OUT/report")) -> None:
    """SFT (cached per seed) then RL one arm; writes OUT/<arm>-s<seed>/organism_run.json."""
    _exit(["run", "--arm", arm, "--seed", seed, "--out", out, "--device", device, "--scale", scale]
          + (["--report"] if report else []), device)


@app.command()
def suite(arms: str = typer.Option("nocheck,nopr,full,grpo", help="comma-separated arms"),
          seeds: str = typer.Option("0,1", help="comma-separated seeds"),
          out: str = typer.Option("runs/org", help="output folder"),
          device: str = typer.Option("auto", help=DEVICE_HELP),
          scale: str = typer.Option("auto", help=SCALE_HELP),
          report: bool = typer.Option(True, help="write the table and plots under OUT/report")) -> None:
    """Every (arm, seed) pair with one gym and one verdict cache; writes OUT/organism_suite.json."""
    _exit(["suite", "--arms", arms, "--seeds", seeds, "--out", out, "--device", device, "--scale", scale]
          + (["--report"] if report else []), device)


@app.command()
def report(paths: list[str] = typer.Argument(..., metavar="PATHS", help="suite bundles, run files or folders"),
           out: str = typer.Option("runs/org/report", help="output folder"),
           tail: int = typer.Option(3, min=1, help="last steps averaged for each run's final numbers")) -> None:
    """Table (markdown), curves (SVG) and claim verdicts from finished runs."""
    _exit(["report", *paths, "--out", out, "--tail", str(tail)], "cpu")


@app.command()
def sft(seed: int = typer.Option(0, help="seed of the SFT starting point"),
        out: str = typer.Option("runs/org/cache", help="cache folder"),
        device: str = typer.Option("auto", help=DEVICE_HELP),
        scale: str = typer.Option("auto", help=SCALE_HELP)) -> None:
    """Only the SFT starting point (for `drkernel train` with task.kind organism)."""
    _exit(["sft", "--seed", str(seed), "--out", out, "--device", device, "--scale", scale], device)


@app.command()
def claims(seeds: int = typer.Option(8, min=1, help="seeds per arm, drawn fresh at run time"),
           arms: str = typer.Option("nocheck,nopr,full", help="comma-separated arms"),
           parallel: int = typer.Option(8, min=1, help="runs at once (processes)"),
           out: str = typer.Option("runs/claims", help="output folder (seeds.json, runs, report)"),
           device: str = typer.Option("auto", help=DEVICE_HELP),
           scale: str = typer.Option("auto", help=SCALE_HELP),
           sft_only: bool = typer.Option(False, help="draw the seeds and SFT them, nothing else")) -> None:
    """The registered claims (hack, lazy, Fast@1.2), each decided by its pre-registered permutation test
    over fresh seeds; a repeat call reads OUT/seeds.json and runs what is missing."""
    _exit(["claims", "--seeds", str(seeds), "--arms", arms, "--parallel", str(parallel), "--out", out,
           "--device", device, "--scale", scale] + (["--sft-only"] if sft_only else []), device)


@app.command()
def probe(device: str = typer.Option("auto", help=DEVICE_HELP),
          scale: str = typer.Option("auto", help=SCALE_HELP),
          cache: str = typer.Option("runs/org/cache", help="the suite's cache folder (verdicts are shared)"),
          problems: int = typer.Option(8, min=1, help="problems per family probed"),
          out: str = typer.Option("", help="also write the probe's numbers to this JSON file")) -> None:
    """Before training: what each arm would pay each writer's program (the lazy trap's ordering)."""
    _exit(["probe", "--device", device, "--scale", scale, "--cache", cache, "--problems", str(problems)]
          + (["--out", out] if out else []), device)
