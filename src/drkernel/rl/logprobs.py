"""Trainer-side log-probs of the sampled tokens, defined exactly as the rollout defines them.

logp_t = log_softmax(logits_{t-1} / temperature)[token_t], computed in float32 from the model's
raw logits, with left padding and position ids cumsum(attention_mask) - 1, as batched generation
uses them. Any difference from the rollout's numbers is then mismatch of the engines (kernels,
dtypes, KV caching), which is what mismatch rejection measures (paper Sec. 6).
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from drkernel.rl.rows import Rows

CHUNK = 1024
"""Completion positions turned into float32 log-probs at once (a [B, CHUNK, V] float32 buffer)."""


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, L] long positions for left-padded rows: cumsum(mask) - 1, 0 on padding (as HF generate)."""
    pos = attention_mask.long().cumsum(-1) - 1
    return pos.masked_fill(attention_mask == 0, 0)


@contextlib.contextmanager
def precision_context(precision: str, device: torch.device) -> Iterator[None]:
    """bf16 autocast for ``bf16-autocast`` on CUDA; nothing otherwise."""
    if precision == "bf16-autocast" and device.type == "cuda":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            yield
    else:
        yield


def completion_logprobs(model: Any, rows: Rows, temperature: float, precision: str = "fp32") -> torch.Tensor:
    """Log-probs of every row's completion tokens under ``model``.

    Args:
        model: a Hugging Face causal LM (or a peft wrapper of one) accepting ``logits_to_keep``.
        rows: a (micro-)batch on the model's device.
        temperature: the rollout's sampling temperature.
        precision: ``fp32``, ``bf16-autocast`` or ``bf16`` (see ModelConfig.precision).

    Returns:
        [R, C] float32, aligned with ``rows.completion_ids``; 0 where ``rows.completion_mask`` is False.
        Differentiable when called with gradients enabled.
    """
    num_cols = rows.completion_ids.shape[1]  # C
    with precision_context(precision, rows.input_ids.device):
        out = model(
            input_ids=rows.input_ids,
            attention_mask=rows.attention_mask,
            position_ids=position_ids(rows.attention_mask),
            logits_to_keep=num_cols + 1,
            use_cache=False,
        )
    # The logits at column L-C-1+j predict completion token j (at column L-C+j): drop the last one.
    logits = out.logits[:, :-1, :]  # (R, C, V)
    pieces = []
    for start in range(0, num_cols, CHUNK):
        chunk = logits[:, start : start + CHUNK].float() / temperature  # (R, c, V)
        tokens = rows.completion_ids[:, start : start + CHUNK].unsqueeze(-1)  # (R, c, 1)
        pieces.append(torch.log_softmax(chunk, dim=-1).gather(-1, tokens).squeeze(-1))  # (R, c)
    logp = torch.cat(pieces, dim=1)  # (R, C)
    return torch.where(rows.completion_mask, logp, torch.zeros_like(logp))
