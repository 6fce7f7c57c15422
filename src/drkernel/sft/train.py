"""The SFT cold-start driver: trajectories -> assistant-masked examples -> TRL's SFTTrainer -> HF model.

``run_sft(SFTConfig(...))`` loads the model and tokenizer (or builds the tiny test model), tokenizes
the exported trajectories with `drkernel.sft.data` (labels only on assistant answers), trains with
TRL's `SFTTrainer` on the pre-tokenized examples and saves model, tokenizer and chat template in
Hugging Face format to ``output_dir``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drkernel.errors import ConfigError
from drkernel.sft.config import SFTConfig
from drkernel.sft.data import build_examples, load_conversations

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SFTResult:
    """What a run did: examples, tokens, steps and the logged losses (``loss/train`` per log step)."""

    output_dir: str
    examples: int
    trained_tokens: int
    total_tokens: int
    steps: int
    losses: list[float]


def load_model(config: SFTConfig) -> tuple[Any, Any]:
    """(model, tokenizer) of ``config.model``, with ``config.chat_template`` installed when given."""
    if config.model == "tiny":
        from drkernel.agent.tiny import build_tiny

        model, tokenizer = build_tiny(seed=config.seed)
        model.train()
    else:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(config.model)
        model = AutoModelForCausalLM.from_pretrained(
            config.model, dtype=torch.bfloat16 if config.bf16 else torch.float32
        )
    if config.chat_template is not None:
        path = Path(config.chat_template)
        if not path.exists():
            raise ConfigError(f"chat_template={config.chat_template!r}: no such file")
        tokenizer.chat_template = path.read_text()
    if tokenizer.chat_template is None:
        raise ConfigError(f"the tokenizer of {config.model!r} has no chat template; set `chat_template`")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def _trl_args(config: SFTConfig) -> Any:
    from trl import SFTConfig as TRLConfig

    return TRLConfig(
        output_dir=config.output_dir,
        learning_rate=config.learning_rate,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        per_device_train_batch_size=config.per_device_batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        warmup_steps=config.warmup_ratio,
        lr_scheduler_type=config.lr_scheduler.value,
        weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm,
        bf16=config.bf16,
        gradient_checkpointing=config.gradient_checkpointing,
        seed=config.seed,
        data_seed=config.seed,
        logging_steps=config.logging_steps,
        save_strategy="steps" if config.save_steps else "no",
        save_steps=config.save_steps or 500,
        report_to=config.report_to or "none",
        max_length=None,
        dataset_num_proc=None,
        use_cpu=not _cuda(),
        dataloader_num_workers=0,
    )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def run_sft(config: SFTConfig) -> SFTResult:
    """Train and save; returns the run's numbers."""
    try:
        from datasets import Dataset
        from trl import SFTTrainer
    except ImportError as e:
        raise ConfigError("drkernel sft needs TRL: pip install 'drkernel[sft]'") from e

    model, tokenizer = load_model(config)
    conversations = load_conversations(config.data, config.min_reward)
    examples = build_examples(tokenizer, conversations, config.max_length, config.overlong.value)
    trained = sum(ex.trained_tokens for ex in examples)
    total = sum(len(ex.input_ids) for ex in examples)
    log.info(
        "%d trajectories, %d tokens, %d of them (%.0f%%) on assistant turns",
        len(examples),
        total,
        trained,
        100 * trained / total,
    )
    dataset = Dataset.from_list([{"input_ids": ex.input_ids, "labels": ex.labels} for ex in examples])
    trainer = SFTTrainer(
        model=model, args=_trl_args(config), train_dataset=dataset, processing_class=tokenizer
    )
    trainer.train()
    trainer.save_model(config.output_dir)
    tokenizer.save_pretrained(config.output_dir)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    result = SFTResult(
        output_dir=config.output_dir,
        examples=len(examples),
        trained_tokens=trained,
        total_tokens=total,
        steps=trainer.state.global_step,
        losses=losses,
    )
    Path(config.output_dir, "drkernel_sft.json").write_text(
        json.dumps({"config": config.to_dict(), "result": vars(result)}, indent=2)
    )
    return result
