"""Trainer log-probs vs the rollout's: identical weights must give identical numbers (MRS keeps all)."""

import asyncio

import pytest
import torch

from drkernel.agent.policies.base import SamplingParams
from drkernel.agent.policies.hf_local import HFLocalPolicy
from drkernel.agent.tiny import build_tiny
from drkernel.rl.logprobs import completion_logprobs, position_ids
from drkernel.rl.mismatch import mismatch_rejection, mismatch_stats
from drkernel.rl.rows import TurnRecord, collate


@pytest.fixture(scope="module")
def tiny():
    return build_tiny(seed=3, hidden=32)


def _rollout(model, tokenizer, temperature: float, max_tokens: int = 12):
    """Sample one batch with prompts of different lengths (so generation left-pads)."""
    policy = HFLocalPolicy(model, tokenizer, batch_size=8)
    prompts = [[{"role": "user", "content": "Write a Triton kernel" + " please" * k}] for k in range(6)]
    torch.manual_seed(0)
    params = SamplingParams(temperature=temperature, top_p=1.0, max_tokens=max_tokens)
    completions = asyncio.run(policy.generate(prompts, params))
    return [
        TurnRecord(
            group=i // 2,
            traj=i,
            turn=0,
            prompt_ids=tuple(c.prompt_token_ids),
            completion_ids=tuple(c.token_ids),
            rollout_logprobs=tuple(c.logprobs),
            reward=0.0,
        )
        for i, c in enumerate(completions)
    ]


def test_position_ids_left_padding():
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert position_ids(mask).tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_identical_weights_keep_every_trajectory(tiny, temperature):
    model, tokenizer = tiny
    records = _rollout(model, tokenizer, temperature)
    assert len({len(r.prompt_ids) for r in records}) > 1, "prompts must differ in length to exercise padding"
    rows = collate(records, tokenizer.pad_token_id)
    with torch.no_grad():
        logp = completion_logprobs(model, rows, temperature)
    mask = rows.completion_mask
    assert mask.sum() == sum(len(r.completion_ids) for r in records)
    torch.testing.assert_close(logp[mask], rows.rollout_logprobs[mask], atol=2e-5, rtol=0)
    keep = mismatch_rejection(logp, rows.rollout_logprobs, mask, rows.traj)
    assert keep.all()
    assert mismatch_stats(logp, rows.rollout_logprobs, mask, keep).max_abs_log_ratio < 2e-5


def test_batched_equals_one_row_at_a_time(tiny):
    """Left padding changes nothing: each row alone (no padding) gives the batched numbers."""
    model, tokenizer = tiny
    records = _rollout(model, tokenizer, 1.0, max_tokens=6)
    rows = collate(records, tokenizer.pad_token_id)
    with torch.no_grad():
        batched = completion_logprobs(model, rows, 1.0)
        for i, r in enumerate(records):
            alone = completion_logprobs(model, collate([r], tokenizer.pad_token_id), 1.0)[0]
            n = len(r.completion_ids)
            torch.testing.assert_close(
                batched[i, batched.shape[1] - n :], alone[alone.shape[0] - n :], atol=1e-5, rtol=0
            )


def test_wrong_temperature_is_caught_by_mrs(tiny):
    """A trainer that forgets the temperature disagrees with the rollout: MRS drops trajectories."""
    model, tokenizer = tiny
    records = _rollout(model, tokenizer, 0.5)
    rows = collate(records, tokenizer.pad_token_id)
    with torch.no_grad():
        logp = completion_logprobs(model, rows, 1.0)
    keep = mismatch_rejection(logp, rows.rollout_logprobs, rows.completion_mask, rows.traj)
    assert not keep.all()


def test_gradients_flow(tiny):
    model, tokenizer = tiny
    records = _rollout(model, tokenizer, 1.0, max_tokens=4)
    rows = collate(records, tokenizer.pad_token_id)
    model.zero_grad()
    logp = completion_logprobs(model, rows, 1.0)
    logp.sum().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and any(g.abs().sum() > 0 for g in grads)
    model.zero_grad()
