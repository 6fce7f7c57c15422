"""`drkernel sft`: SFT cold start on exported trajectories (loss on assistant turns only)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console

from drkernel.cli.checks import refuse, writable_dir
from drkernel.cli.options import build, set_option
from drkernel.errors import DrKernelError

console = Console()


def sft(
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML SFT config (configs/sft/*.yaml)"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="HF model path or hub id, or 'tiny'"),
    data: Optional[List[Path]] = typer.Option(None, "--data", "-d", help="trajectory .jsonl/.parquet (repeatable)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="output folder, Hugging Face format (output_dir)"),
    chat_template: Optional[Path] = typer.Option(None, "--chat-template",
                                                 help="Jinja template replacing the tokenizer's"),
    min_reward: Optional[float] = typer.Option(None, "--min-reward",
                                               help="keep trajectories whose best turn reaches it"),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=1, help="token limit per trajectory"),
    lr: Optional[float] = typer.Option(None, "--lr", help="peak learning rate (learning_rate)"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="passes over the data"),
    max_steps: Optional[int] = typer.Option(None, "--max-steps", help="stop after this many optimiser steps"),
    set_: Optional[List[str]] = set_option("SFT config (SFTConfig)", "lr_scheduler=linear"),
) -> None:
    """Train on trajectories written by `drkernel bench run` and save the model in Hugging Face format.
    Options left out take the --config file's values, else SFTConfig's defaults."""
    from drkernel.config import read_yaml_mapping
    from drkernel.sft.config import SFTConfig
    from drkernel.sft.train import run_sft

    given = {"model": model, "data": [str(p) for p in data] if data else None,
             "output_dir": str(out) if out else None,
             "chat_template": str(chat_template) if chat_template else None, "min_reward": min_reward,
             "max_length": max_length, "learning_rate": lr, "epochs": epochs, "max_steps": max_steps}
    try:
        base = read_yaml_mapping(config, "SFT config") if config else {}
        cfg = build(SFTConfig, "SFT config", base, given, set_, make=SFTConfig.from_dict)
    except DrKernelError as e:
        refuse(str(e))
    writable_dir(Path(cfg.output_dir), "output_dir")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
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
