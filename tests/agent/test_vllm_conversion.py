"""`drkernel.agent.policies.vllm_engine` without vLLM: the engine is asked for the log-probs of the
distribution it samples from, and its output is converted token by token.

vLLM's V1 sampler returns raw log-probs (before temperature) unless ``logprobs_mode`` says otherwise;
the trainer compares rollout log-probs with log_softmax(logits / T), so raw ones at T != 1 would make
mismatch rejection drop every row. The numbers below are what each mode would report for one
position, worked with the same logits and T = 0.5.
"""

import math
from types import SimpleNamespace

import torch

from drkernel.agent.policies.vllm_engine import LOGPROBS_MODE, completion_of, engine_kwargs
from drkernel.rl.mismatch import mismatch_rejection


def _output(token_ids, positions, prompt=(1, 2)):
    sample = SimpleNamespace(text="ab", finish_reason="length", token_ids=token_ids, logprobs=positions)
    return SimpleNamespace(outputs=[sample], prompt_token_ids=list(prompt))


def _lp(x):
    return SimpleNamespace(logprob=x, rank=1, decoded_token="?")


def test_engine_asks_for_processed_logprobs():
    assert LOGPROBS_MODE == "processed_logprobs"
    assert engine_kwargs(2, 0.6, None) == {
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.6,
        "logprobs_mode": "processed_logprobs",
    }
    assert engine_kwargs(1, 0.9, 4096)["max_model_len"] == 4096


def test_completion_takes_the_sampled_tokens_logprob_at_each_position():
    # position 0 sampled token 7 (the top-1 alternative 3 is listed too); position 1 sampled 9,
    # which was not the most likely token
    out = _output([7, 9], [{7: _lp(-0.1), 3: _lp(-2.5)}, {4: _lp(-0.3), 9: _lp(-1.7)}])
    c = completion_of(out)
    assert (c.token_ids, c.logprobs, c.prompt_token_ids) == ([7, 9], [-0.1, -1.7], [1, 2])
    assert (c.finish_reason, c.usage) == ("length", {"prompt_tokens": 2, "completion_tokens": 2})
    assert completion_of(_output([5], None)).logprobs is None  # log-probs not asked for


def test_raw_logprobs_at_low_temperature_would_fail_mrs():
    logits = torch.tensor([2.0, 1.0, 0.0])
    t, token = 0.5, 0
    # -log(1 + e^-2 + e^-4) = -0.1429 (logits / T = 4, 2, 0); raw: -log(1 + e^-1 + e^-2) = -0.4076
    processed = torch.log_softmax(logits / t, -1)[token].item()  # what the trainer computes
    raw = torch.log_softmax(logits, -1)[token].item()
    assert math.isclose(processed, -0.1429, abs_tol=1e-4) and math.isclose(raw, -0.4076, abs_tol=1e-4)
    trainer = torch.full((1, 4), processed)
    mask = torch.ones(1, 4, dtype=torch.bool)
    traj = torch.zeros(1, dtype=torch.long)
    keep_processed = mismatch_rejection(trainer, torch.full((1, 4), processed), mask, traj, 0.999, 1.001, 1e-4)
    keep_raw = mismatch_rejection(trainer, torch.full((1, 4), raw), mask, traj, 0.999, 1.001, 1e-4)
    assert keep_processed.tolist() == [True] and keep_raw.tolist() == [False]
