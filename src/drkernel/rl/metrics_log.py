"""Step metrics to ``metrics.jsonl`` (always), TensorBoard and Weights & Biases (optional), and a
live progress display.

Metric names carry a prefix: ``reward/``, ``loss/``, ``mismatch/``, ``gym/``, ``perf/``.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from drkernel.errors import ConfigError

log = logging.getLogger(__name__)

PREFIXES = ("reward/", "loss/", "mismatch/", "gym/", "perf/")
HEADLINE = ("reward/mean", "loss/loss", "mismatch/rejected_fraction", "perf/tokens_per_s")


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``."""
    p = Path(path)
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def truncate_jsonl(path: str | Path, max_step: int) -> None:
    """Drop the lines of ``path`` whose ``step`` is after ``max_step`` (a resumed run redoes them)."""
    p = Path(path)
    if p.exists():
        kept = [r for r in read_metrics(p) if r.get("step", 0) <= max_step]
        p.write_text("".join(json.dumps(r) + "\n" for r in kept))


class MetricsLogger:
    """Appends one JSON line per step; on resume drops lines of steps after the checkpoint."""

    def __init__(
        self,
        output_dir: str | Path,
        resume_step: int = 0,
        tensorboard: bool = False,
        wandb_project: str | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = Path(output_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        truncate_jsonl(self.path, resume_step)
        self._tb = self._wandb = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as e:
                raise ConfigError(
                    "run.tensorboard=true needs the tensorboard package: pip install 'drkernel[tensorboard]'"
                ) from e
            self._tb = SummaryWriter(str(Path(output_dir) / "tensorboard"))
        if wandb_project:
            try:
                import wandb
            except ImportError as e:
                raise ConfigError("run.wandb_project needs wandb: pip install 'drkernel[wandb]'") from e
            self._wandb = wandb.init(
                project=wandb_project, config=dict(config or {}), resume="allow", dir=str(output_dir)
            )

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        bad = [k for k in metrics if not k.startswith(PREFIXES)]
        if bad:
            raise ValueError(f"metric names must start with one of {PREFIXES}: {bad}")
        clean = {k: (float(v) if math.isfinite(float(v)) else None) for k, v in metrics.items()}
        with self.path.open("a") as f:
            f.write(json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
        if self._tb is not None:
            for k, v in clean.items():
                if v is not None:
                    self._tb.add_scalar(k, v, step)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in clean.items() if v is not None}, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


class ProgressDisplay:
    """A rich progress bar over steps with the headline metrics, on a terminal; log lines otherwise
    (and where rich is not installed, e.g. a bare GPU box)."""

    def __init__(self, total: int, start: int, enabled: bool = True) -> None:
        self._progress = self._task = None
        if enabled and sys.stderr.isatty():
            try:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )
            except ImportError:
                pass
            else:
                self._progress = Progress(
                    TextColumn("[bold]train"),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    TextColumn("{task.fields[info]}"),
                )
                self._task = self._progress.add_task("train", total=total, completed=start, info="")
                self._progress.start()

    def update(self, step: int, metrics: Mapping[str, float]) -> None:
        info = "  ".join(f"{k.split('/')[-1]}={metrics[k]:.4g}" for k in HEADLINE if k in metrics)
        if self._progress is not None:
            self._progress.update(self._task, completed=step, info=info)
        else:
            log.info("step %d  %s", step, info)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
