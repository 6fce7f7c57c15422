"""`drkernel organism run|suite|report|sft`: the miniature Dr. Kernel (drkernel.organism)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="The organism: generated problem families, a small code-writing policy, the ablation arms.")


def _exit(argv: list[str]) -> None:
    from drkernel.organism.__main__ import main

    code = main(argv)
    if code:
        raise typer.Exit(code)


@app.command()
def run(arm: str = typer.Option("full", help="nocheck, nopr, full or grpo"),
        seed: str = typer.Option("0", help="seed, or comma-separated seeds"),
        out: str = typer.Option("runs/org", help="output folder"),
        device: str = typer.Option("auto", help="auto, cpu, cuda or cuda:N (model and gym)"),
        scale: str = typer.Option("auto", help="gpu, cpu, dry or auto (gpu when CUDA is there)"),
        report: bool = typer.Option(False, help="also write the table and plots under OUT/report")) -> None:
    """SFT (cached per seed) then RL one arm; writes OUT/<arm>-s<seed>/organism_run.json."""
    _exit(["run", "--arm", arm, "--seed", seed, "--out", out, "--device", device, "--scale", scale]
          + (["--report"] if report else []))


@app.command()
def suite(arms: str = typer.Option("nocheck,nopr,full,grpo"), seeds: str = typer.Option("0,1"),
          out: str = typer.Option("runs/org"), device: str = typer.Option("auto"),
          scale: str = typer.Option("auto"), report: bool = typer.Option(True)) -> None:
    """Every (arm, seed) pair with one gym and one verdict cache; writes OUT/organism_suite.json."""
    _exit(["suite", "--arms", arms, "--seeds", seeds, "--out", out, "--device", device, "--scale", scale]
          + (["--report"] if report else []))


@app.command()
def report(paths: list[str] = typer.Argument(..., help="suite bundles, run files or folders"),
           out: str = typer.Option("runs/org/report"), tail: int = typer.Option(3)) -> None:
    """Table (markdown), curves (SVG) and claim verdicts from finished runs."""
    _exit(["report", *paths, "--out", out, "--tail", str(tail)])


@app.command()
def sft(seed: int = typer.Option(0), out: str = typer.Option("runs/org/cache"),
        device: str = typer.Option("auto"), scale: str = typer.Option("auto")) -> None:
    """Only the SFT starting point (for `drkernel train` with task.kind organism)."""
    _exit(["sft", "--seed", str(seed), "--out", out, "--device", device, "--scale", scale])
