"""The organism's policy: a BPE tokenizer trained on its corpus and a Llama trained from scratch.

Sizes: ``cpu`` (about 0.1 M parameters, for the test suite) and ``gpu`` (about 11 M, for the arms).
`sft` is a plain causal-LM loop with the loss on the assistant's tokens only; `save` writes a Hugging
Face folder the RL trainer loads as ``model.source``.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from drkernel.agent.tiny import CHAT_TEMPLATE, SPECIAL
from drkernel.organism.corpus import Example

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelSize:
    hidden: int
    layers: int
    heads: int
    vocab: int = 384


SIZES = {"cpu": ModelSize(hidden=64, layers=2, heads=4), "gpu": ModelSize(hidden=384, layers=6, heads=6)}


def _chat(tokenizer: Any, messages: Sequence[dict[str, str]]) -> list[int]:
    """Prompt ids exactly as the rollout policy encodes them (`HFLocalPolicy.encode`)."""
    text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def build_tokenizer(examples: Sequence[Example], vocab_size: int) -> Any:
    """Byte-level BPE trained on the corpus rendered through the chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = []
    for e in examples:
        for m in (*e.messages, {"role": "assistant", "content": e.completion}):
            texts.append(f"{SPECIAL['start']}{m['role']}\n{m['content']}{SPECIAL['eos']}\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIAL["bos"], eos_token=SPECIAL["eos"],
                                   pad_token=SPECIAL["pad"], additional_special_tokens=[SPECIAL["start"]])
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def build_model(tokenizer: Any, size: ModelSize, seed: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=size.hidden,
                         intermediate_size=int(2.75 * size.hidden),
                         num_hidden_layers=size.layers, num_attention_heads=size.heads,
                         num_key_value_heads=size.heads, max_position_embeddings=512,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


def encode_examples(examples: Sequence[Example], tokenizer: Any) -> list[tuple[list[int], int]]:
    """(ids, prompt length) per example: prompt as the policy encodes it, then the program and eos."""
    rows = []
    for e in examples:
        prompt = _chat(tokenizer, e.messages)
        completion = tokenizer(e.completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((prompt + completion, len(prompt)))
    return rows


def _batch(rows: Sequence[tuple[list[int], int]], pad: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, (seq, n_prompt) in enumerate(rows):  # right padding: positions start at 0 for every row
        ids[i, : len(seq)] = torch.tensor(seq)
        labels[i, n_prompt : len(seq)] = torch.tensor(seq[n_prompt:])
        mask[i, : len(seq)] = 1
    return ids.to(device), labels.to(device), mask.to(device)


def sft(model: Any, tokenizer: Any, examples: Sequence[Example], steps: int, batch_size: int, lr: float,
        seed: int, device: torch.device) -> list[float]:
    """Causal-LM training on the assistant tokens; returns the loss of every step."""
    rows = encode_examples(examples, tokenizer)
    rng = random.Random(seed)
    model.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / 20) * max(0.1, 1 - i / steps))
    losses = []
    for _ in range(steps):
        chosen = rng.sample(rows, min(batch_size, len(rows)))
        ids, labels, mask = _batch(chosen, tokenizer.pad_token_id, device)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def save(model: Any, tokenizer: Any, path: str | Path) -> Path:
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def n_params(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())
