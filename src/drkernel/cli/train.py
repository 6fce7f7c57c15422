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

from drkernel.cli.checks import writable_dir
from drkernel.cli.devices import check_devices
from drkernel.cli.options import set_option
from drkernel.errors import ConfigError, DrKernelError, InfrastructureError

console = Console(stderr=True)


def train(
    config: Path = typer.Option(..., "--config", "-c", help="YAML train config (configs/train/*.yaml)"),
    set_: Optional[List[str]] = set_option("train config", "optim.lr=1e-5 or eval.device=cpu"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output folder (sets run.output_dir)"),
    steps: Optional[int] = typer.Option(None, "--steps", min=1, help="total steps (sets run.steps)"),
    fresh: bool = typer.Option(False, "--fresh", help="ignore existing checkpoints instead of resuming"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="log every step"),
    nproc: int = typer.Option(
        1, "--nproc", min=1, help="data-parallel ranks on this machine (one per GPU; gloo on CPU)"
    ),
) -> None:
    """Train a policy with TRLOO + MRS + PR + PRS; resumes from the latest checkpoint in the output folder."""
    from drkernel.rl.config import load_config

    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    overrides = [*(f"{k}={v}" for k, v in (("run.output_dir", out), ("run.steps", steps)) if v is not None),
                 *(["run.resume=false"] if fresh else []), *(set_ or [])]
    try:
        cfg = load_config(config, overrides)
    except ConfigError as e:
        console.print(f"[red]config error:[/red] {e}")
        raise typer.Exit(2) from e
    writable_dir(Path(cfg.run.output_dir), "run.output_dir")
    check_devices(_named_devices(cfg))
    history = _run(cfg, nproc, level)
    if os.environ.get("RANK", "0") != "0":
        return  # under torchrun rank 0 reports
    console.print("\n".join(summary(history, cfg.run.output_dir, cfg.run.steps, nproc)))


def _named_devices(cfg) -> list[tuple[str, str]]:
    """The config's devices this machine must have (the gym's only when it runs in this process)."""
    named = [("model.device", cfg.model.device), ("rollout.device", cfg.rollout.device)]
    if cfg.gym.kind == "in_process":
        named.append(("eval.device", cfg.eval.device))
    return named


def _run(cfg, nproc: int, level: int) -> list[dict[str, float]]:
    """The metrics of the steps this launch ran (on ``nproc`` ranks); exit 2 or 3 on failure."""
    from drkernel.rl.distributed import launch
    from drkernel.rl.metrics_log import read_metrics
    from drkernel.tasks import train as run_training

    try:
        if nproc == 1:
            return run_training(cfg)
        started = time.time()
        launch(run_training, cfg, nproc, level)
        records = read_metrics(Path(cfg.run.output_dir) / "metrics.jsonl")
        return [r for r in records if r["time"] >= started]  # the steps of this launch
    except ConfigError as e:
        console.print(f"[red]config error:[/red] {e}")
        raise typer.Exit(2) from e
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/red] {e}")
        raise typer.Exit(3) from e
    except DrKernelError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from e


SUMMARY = (  # (metric, label, format, what it is)
    ("reward/mean", "mean turn reward", "{:.3f}", "per turn, 0 to 2.5 (docs/METHOD.md section 5)"),
    ("mismatch/rejected_fraction", "rejected by MRS", "{:.1%}", "trajectories whose rollout and trainer "
                                                                 "probabilities disagree"),
    ("perf/tokens_per_s", "rollout speed", "{:.1f} tokens/s", "completion tokens per second of rollout"),
    ("loss/loss", "policy loss", "{:.4g}", "summed over each row's tokens, so its size follows the "
                                           "lengths; compare runs by reward, not by loss"),
)


def summary(history: list[dict[str, float]], output_dir: str, steps: int, nproc: int) -> list[str]:
    """What a run did, for a person: steps, ranks, folder, then the last step's headline metrics."""
    if not history:
        return [f"nothing to do: {output_dir} already holds {steps} steps (--steps N to train on, "
                "--fresh to start over)"]
    ranks = f" on {nproc} data-parallel ranks" if nproc > 1 else ""
    lines = [f"done: {len(history)} steps run{ranks}, output in {output_dir} (metrics.jsonl, checkpoints)",
             f"last step ({int(history[-1].get('step', len(history)))} of {steps}):"]
    for key, label, fmt, what in SUMMARY:
        if key in history[-1]:
            lines.append(f"  {label:<18} {fmt.format(history[-1][key]):>16}  {key}: {what}")
    return lines
