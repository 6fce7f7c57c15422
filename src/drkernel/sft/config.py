"""SFT cold-start configuration: one frozen dataclass, every field documented, unknown keys are errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from drkernel.config import from_mapping, read_yaml_mapping, to_plain
from drkernel.errors import ConfigError


class Overlong(str, enum.Enum):
    """What to do with a trajectory longer than ``max_length``."""

    DROP = "drop"
    TRUNCATE = "truncate"


class Scheduler(str, enum.Enum):
    """Learning-rate schedules (Hugging Face ``lr_scheduler_type`` names)."""

    CONSTANT = "constant"
    CONSTANT_WITH_WARMUP = "constant_with_warmup"
    LINEAR = "linear"
    COSINE = "cosine"


@dataclass(frozen=True)
class SFTConfig:
    """How `drkernel sft` trains (paper setting: docs/METHOD.md section 6, lr 2e-5, 4 epochs)."""

    model: str
    """A Hugging Face model path or hub id, or ``tiny`` (the locally built random test model)."""
    data: list[str]
    """Trajectory files exported by ``drkernel bench run`` (``.jsonl`` or ``.parquet``)."""
    output_dir: str
    """Where checkpoints and the final model (Hugging Face format) are written."""
    chat_template: str | None = None
    """A Jinja chat template file that replaces the tokenizer's own (and is saved with the model).
    Needed when the tokenizer's template renders earlier turns differently from later ones (Qwen3's
    drops ``<think>`` from all but the last answer): assistant masks need a prefix-stable template."""
    min_reward: float | None = None
    """Keep only trajectories whose best turn reward is at least this; None keeps all."""
    max_length: int = 32768
    """Token limit per trajectory."""
    overlong: Overlong = Overlong.DROP
    """What to do with a longer trajectory: ``drop`` it or ``truncate`` it (cutting its last turns)."""
    learning_rate: float = 2e-5
    """Peak learning rate."""
    epochs: float = 4.0
    """Passes over the data."""
    max_steps: int = -1
    """Stop after this many optimiser steps (-1: run all epochs)."""
    per_device_batch_size: int = 1
    """Trajectories per device per micro-batch."""
    gradient_accumulation_steps: int = 8
    """Micro-batches per optimiser step."""
    warmup_ratio: float = 0.03
    """Fraction of the steps spent warming the learning rate up."""
    lr_scheduler: Scheduler = Scheduler.COSINE
    """Learning-rate schedule: one of ``constant``, ``constant_with_warmup``, ``linear``, ``cosine``."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping."""
    bf16: bool = False
    """Train in bfloat16 mixed precision (GPU)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to fit long trajectories."""
    seed: int = 0
    """Seed of the data order and, for ``tiny``, of the model's weights."""
    logging_steps: int = 10
    """Log the loss every this many steps."""
    save_steps: int = 0
    """Save a checkpoint every this many steps (0: only the final model)."""
    report_to: list[str] = field(default_factory=list)
    """Trackers (``wandb``, ``tensorboard``); empty logs to the console only."""

    def __post_init__(self) -> None:
        problems = []
        if not self.data:
            problems.append("data=[] (at least one trajectory file)")
        for name, choices in (("overlong", Overlong), ("lr_scheduler", Scheduler)):
            value = getattr(self, name)
            if value not in {c.value for c in choices}:
                problems.append(f"{name}={value!r} (one of {[c.value for c in choices]})")
            else:
                object.__setattr__(self, name, choices(value))  # the enum, also when built from a string
        for name in ("max_length", "per_device_batch_size", "gradient_accumulation_steps", "logging_steps"):
            if getattr(self, name) < 1:
                problems.append(f"{name}={getattr(self, name)} (at least 1)")
        if self.learning_rate <= 0 or self.epochs <= 0:
            problems.append(f"learning_rate={self.learning_rate}, epochs={self.epochs} (both positive)")
        if self.max_steps == 0 or self.max_steps < -1:
            problems.append(f"max_steps={self.max_steps} (-1 or positive)")
        if problems:
            raise ConfigError("invalid SFTConfig: " + "; ".join(problems))

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SFTConfig":
        """Types checked, unknown and missing keys named (`drkernel.config`); ``data`` may be one path."""
        d = dict(d)
        if isinstance(d.get("data"), str):
            d["data"] = [d["data"]]
        return from_mapping(cls, d)

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> "SFTConfig":
        return cls.from_dict({**read_yaml_mapping(path, "SFT config"), **overrides})
