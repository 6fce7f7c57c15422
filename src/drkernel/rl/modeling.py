"""Build the policy model and tokenizer of a run: the tiny local model, a Hugging Face folder or hub
name, optionally wrapped with LoRA adapters, or the weights of a checkpoint when resuming; and the
full weights a rollout engine loads (:func:`rollout_state_dict`, LoRA merged)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from drkernel.errors import ConfigError
from drkernel.rl.config import ModelConfig


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


def is_lora(model: Any) -> bool:
    """Whether ``model`` is a peft model (LoRA adapters around a base model)."""
    return hasattr(model, "peft_config") and hasattr(model, "get_base_model")


def rollout_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The full weights a rollout engine loads, under the base model's parameter names.

    Without LoRA this is ``model.state_dict()``. With LoRA every adapted weight is merged,
    ``W + scaling * B @ A`` (peft's ``get_delta_weight``, summed in fp32 and cast back to W's dtype),
    into new tensors: the training model keeps its unmerged adapters. Adapter tensors are left out and
    ``q_proj.base_layer.weight`` is named ``q_proj.weight``, as in the base model's own checkpoint.
    """
    if not is_lora(model):
        return model.state_dict()
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    state = {
        key.replace(".base_layer.", "."): tensor.detach()
        for key, tensor in base.state_dict().items()
        if ".lora_" not in key
    }
    with torch.no_grad():
        for name, module in base.named_modules():
            if not isinstance(module, LoraLayer) or module.merged:
                continue
            key = f"{name}.weight"
            merged = state[key].float()
            for adapter in module.active_adapters:
                if adapter in module.lora_A or adapter in module.lora_embedding_A:
                    merged = merged + module.get_delta_weight(adapter).float()
            state[key] = merged.to(state[key].dtype)
    return state
