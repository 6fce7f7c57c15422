"""Checkpoints in Hugging Face format plus the trainer state needed to resume exactly.

Layout under ``<output_dir>/checkpoints``::

    step_000010/            model (save_pretrained; the adapter only with LoRA) + tokenizer
        trainer_state.pt    step, optimizer, scheduler, RNG states, config
    latest                  the name of the newest complete checkpoint

A checkpoint is written to ``step_N.tmp`` and renamed when complete, then ``latest`` is replaced
atomically, so an interruption mid-save leaves the previous checkpoint as the latest.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

STATE_FILE = "trainer_state.pt"


def checkpoint_dir(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    output_dir: str | Path,
    step: int,
    model: Any,
    tokenizer: Any,
    optimizer: Any,
    scheduler: Any,
    config: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Save after ``step`` completed steps; returns the checkpoint folder. ``keep`` > 0 prunes older ones."""
    root = checkpoint_dir(output_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f"step_{step:06d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_state(),
            "config": config,
        },
        tmp / STATE_FILE,
    )
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    pointer = root / "latest.tmp"
    pointer.write_text(final.name)
    os.replace(pointer, root / "latest")
    if keep > 0:
        for old in sorted(p for p in root.glob("step_*") if p.is_dir() and not p.name.endswith(".tmp"))[
            :-keep
        ]:
            shutil.rmtree(old, ignore_errors=True)
    log.info("saved checkpoint %s", final)
    return final


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    pointer = checkpoint_dir(output_dir) / "latest"
    if not pointer.exists():
        return None
    path = checkpoint_dir(output_dir) / pointer.read_text().strip()
    return path if (path / STATE_FILE).exists() else None


def load_trainer_state(path: Path, optimizer: Any, scheduler: Any) -> int:
    """Restore optimizer, scheduler and RNG states from a checkpoint; returns its step."""
    state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return int(state["step"])
