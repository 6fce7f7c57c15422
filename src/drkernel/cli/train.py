"""`drkernel train --config <yaml> [--nproc N]`: the single-node Dr. Kernel RL trainer (N data-parallel ranks;
or run it under `torchrun --nproc-per-node N -m drkernel train ...`)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from drkernel.errors import ConfigError, DrKernelError, InfrastructureError

console = Console(stderr=True)


def train(
    config: Path = typer.Option(..., "--config", "-c", help="YAML train config (configs/train/*.yaml)"),
    set_: Optional[List[str]] = typer.Option(
        None, "--set", "-s", help="override, e.g. optim.lr=1e-5 (repeatable)"
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output folder (overrides run.output_dir)"),
    steps: Optional[int] = typer.Option(None, "--steps", help="total steps (overrides run.steps)"),
    fresh: bool = typer.Option(False, "--fresh", help="ignore existing checkpoints instead of resuming"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log every step"),
    nproc: int = typer.Option(
        1, "--nproc", min=1, help="data-parallel ranks on this machine (one per GPU; gloo on CPU)"
    ),
) -> None:
    """Train a policy with TRLOO + MRS + PR + PRS; resumes from the latest checkpoint in the output folder."""
    from drkernel.rl.config import load_config
    from drkernel.rl.distributed import launch
    from drkernel.rl.metrics_log import read_metrics
    from drkernel.rl.trainer import train as run_training

    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    overrides = list(set_ or [])
    if out is not None:
        overrides.append(f"run.output_dir={out}")
    if steps is not None:
        overrides.append(f"run.steps={steps}")
    if fresh:
        overrides.append("run.resume=false")
    try:
        cfg = load_config(config, overrides)
        if nproc > 1:
            started = time.time()
            launch(run_training, cfg, nproc, level)
            records = read_metrics(Path(cfg.run.output_dir) / "metrics.jsonl")
            history = [r for r in records if r["time"] >= started]  # the steps of this launch
        else:
            history = run_training(cfg)
    except ConfigError as e:
        console.print(f"[red]config error:[/red] {e}")
        raise typer.Exit(2) from e
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/red] {e}")
        raise typer.Exit(3) from e
    except DrKernelError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun rank 0 reports
    if history:
        last = history[-1]
        shown = {
            k: round(v, 4)
            for k, v in last.items()
            if k in ("reward/mean", "loss/loss", "mismatch/rejected_fraction")
        }
        console.print(f"done: {len(history)} steps run, output in {cfg.run.output_dir}; last step {shown}")
    else:
        console.print(f"nothing to do: {cfg.run.output_dir} already holds {cfg.run.steps} steps")
