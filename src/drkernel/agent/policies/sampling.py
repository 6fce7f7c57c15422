"""Token sampling with exact rollout log-probs, and the KV-cached decode loop of the local policy.

The rollout log-prob of a sampled token is ``log_softmax(logits / T)`` at that token (T = 1 for
greedy), i.e. what a trainer recomputes from the same weights; top-p only restricts which tokens can
be drawn. Only one step's (B, V) distribution is alive at a time, so memory does not grow with the
completion length (unlike keeping every step's logits).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch


def sample_next(
    logits: torch.Tensor, temperature: float, top_p: float, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token per row and its rollout log-prob.

    Args:
        logits: (B, V) raw next-token logits.
        temperature: 0 = greedy.
        top_p: nucleus mass in (0, 1]; the smallest set of most likely tokens whose mass reaches it.
        generator: random source (seeded for reproducible rollouts).

    Returns:
        tokens (B,) long and logp (B,) float32 = log_softmax(logits / T)[token].
    """
    logp_all = torch.log_softmax(logits.float() / (temperature if temperature > 0 else 1.0), dim=-1)  # (B, V)
    if temperature == 0:
        tokens = logp_all.argmax(dim=-1)
    else:
        probs, order = logp_all.exp().sort(dim=-1, descending=True)  # (B, V)
        before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
        probs = probs.masked_fill(before >= top_p, 0.0)  # the first token always stays
        pick = torch.multinomial(probs, 1, generator=generator)  # (B, 1), renormalised by multinomial
        tokens = order.gather(-1, pick).squeeze(-1)
    return tokens, logp_all.gather(-1, tokens[:, None]).squeeze(-1)


@torch.no_grad()
def decode(
    model: Any,
    ids: torch.Tensor,
    mask: torch.Tensor,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    eos_id: int,
    pad_id: int,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample continuations of left-padded prompts with a KV cache.

    Args:
        ids, mask: (B, P) left-padded prompt ids and attention mask.

    Returns:
        tokens (B, L) and logp (B, L); after a row's eos its tokens are ``pad_id``.
    """
    # only the last position's logits are needed (prefill of B x P x V logits would be large)
    keep = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, P): real tokens count from 0 after the padding
    next_pos = mask.sum(-1, keepdim=True)  # (B, 1)
    done = torch.zeros(ids.shape[0], dtype=torch.bool, device=ids.device)
    cache, step_ids, tokens, logps = None, ids, [], []
    for _ in range(max_new_tokens):
        out = model(
            input_ids=step_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            **keep,
        )
        cache = out.past_key_values
        tok, lp = sample_next(out.logits[:, -1, :], temperature, top_p, generator)
        tok = tok.masked_fill(done, pad_id)
        tokens.append(tok)
        logps.append(lp.masked_fill(done, 0.0))
        done |= tok == eos_id
        if bool(done.all()):
            break
        step_ids, positions = tok[:, None], next_pos
        next_pos = next_pos + 1
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
    return torch.stack(tokens, dim=1), torch.stack(logps, dim=1)
