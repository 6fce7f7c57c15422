"""The `drkernel` command: one sub-command group per package folder.

Exit codes (every sub-command):
    0  success (for `gym eval`: the solution is valid)
    1  the evaluated solution is not valid (incorrect, failed or hacked)
    2  bad usage or bad input (unknown problem, unreadable file, invalid config)
    3  infrastructure failure (a worker or the service failed)
"""

from __future__ import annotations

import typer

from drkernel import __version__

from drkernel.cli import agent as agent_cli
from drkernel.cli import bench as bench_cli
from drkernel.cli import gym as gym_cli
from drkernel.cli import organism as organism_cli
from drkernel.cli.options import group
from drkernel.cli import problems as problems_cli
from drkernel.cli import sft as sft_cli
from drkernel.cli import train as train_cli

app = group("drkernel: KernelGym, kernel agents and Dr. Kernel RL for Triton kernels.")
app.add_typer(problems_cli.app, name="problems")
app.add_typer(gym_cli.app, name="gym")
app.command("demo")(gym_cli.demo)
app.add_typer(agent_cli.app, name="agent")
app.add_typer(bench_cli.app, name="bench")
app.command("train")(train_cli.train)
app.command("sft")(sft_cli.sft)
app.add_typer(organism_cli.app, name="organism")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"drkernel {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """drkernel: KernelGym, kernel agents and Dr. Kernel RL for Triton kernels."""


def main() -> None:
    app()
