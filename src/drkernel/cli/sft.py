"""`drkernel sft`: SFT cold start on exported trajectories (loss on assistant turns only)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from drkernel.errors import DrKernelError

console = Console()


def sft(
    config: Optional[Path] = typer.Option(
        None, "--config", "-c", help="YAML SFT config (configs/sft/*.yaml)"
    ),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="HF model path or hub id, or 'tiny'"),
    data: Optional[List[Path]] = typer.Option(
        None, "--data", "-d", help="trajectory .jsonl/.parquet (repeatable)"
    ),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output folder (HF format)"),
    chat_template: Optional[Path] = typer.Option(
        None, "--chat-template", help="Jinja template replacing the tokenizer's"
    ),
    min_reward: Optional[float] = typer.Option(
        None, "--min-reward", help="keep trajectories whose best turn reaches it"
    ),
    max_length: Optional[int] = typer.Option(None, "--max-length"),
    lr: Optional[float] = typer.Option(None, "--lr"),
    epochs: Optional[float] = typer.Option(None, "--epochs"),
    max_steps: Optional[int] = typer.Option(None, "--max-steps"),
) -> None:
    """Train on trajectories written by `drkernel bench run` and save the model in Hugging Face format."""
    from drkernel.sft.config import SFTConfig
    from drkernel.sft.train import run_sft

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    overrides = {
        k: v
        for k, v in {
            "model": model,
            "data": [str(p) for p in data] if data else None,
            "output_dir": str(out) if out else None,
            "chat_template": str(chat_template) if chat_template else None,
            "min_reward": min_reward,
            "max_length": max_length,
            "learning_rate": lr,
            "epochs": epochs,
            "max_steps": max_steps,
        }.items()
        if v is not None
    }
    try:
        cfg = SFTConfig.from_yaml(config, **overrides) if config else SFTConfig.from_dict(overrides)
        result = run_sft(cfg)
    except DrKernelError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2) from e
    first, last = (result.losses[0], result.losses[-1]) if result.losses else (float("nan"), float("nan"))
    console.print(
        f"trained {result.steps} steps on {result.examples} trajectories "
        f"({result.trained_tokens}/{result.total_tokens} tokens on assistant turns); "
        f"loss {first:.3f} -> {last:.3f}; saved to {result.output_dir}"
    )
