"""Build the policy model and tokenizer of a run: the tiny local model, a Hugging Face folder or hub
name, optionally wrapped with LoRA adapters, or the weights of a checkpoint when resuming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from drkernel.errors import ConfigError
from drkernel.rl.config import ModelConfig


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"model.device={name!r} but no CUDA device is available")
    return device


def _base_model(config: ModelConfig, source: str | Path) -> tuple[Any, Any]:
    dtype = torch.bfloat16 if config.precision == "bf16" else torch.float32
    if source == "tiny":
        from drkernel.agent.tiny import build_tiny

        model, tokenizer = build_tiny(
            seed=config.tiny_seed,
            hidden=config.tiny_hidden,
            layers=config.tiny_layers,
            heads=config.tiny_heads,
        )
        return model.to(dtype), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(source))
        model = AutoModelForCausalLM.from_pretrained(str(source), dtype=dtype)
    except OSError as e:
        raise ConfigError(f"cannot load model {source!r}: {e}") from e
    return model, tokenizer


def load_model(config: ModelConfig, device: torch.device, checkpoint: Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) on ``device``: from ``checkpoint`` when given (adapters only with LoRA)."""
    if config.lora.enabled:
        from peft import LoraConfig, PeftModel, get_peft_model

        base, tokenizer = _base_model(config, config.source)
        if checkpoint is not None:
            model = PeftModel.from_pretrained(base, str(checkpoint), is_trainable=True)
        else:
            lora = config.lora
            model = get_peft_model(
                base,
                LoraConfig(
                    r=lora.r,
                    lora_alpha=lora.alpha,
                    lora_dropout=lora.dropout,
                    target_modules=list(lora.target_modules),
                    task_type="CAUSAL_LM",
                ),
            )
    else:
        model, tokenizer = _base_model(config, checkpoint if checkpoint is not None else config.source)
    if checkpoint is not None:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(checkpoint))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    if config.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    return model.to(device).eval(), tokenizer
