"""Top-p sampling and rollout log-probs, checked against hand-worked distributions."""

import math

import torch

from drkernel.agent.policies.sampling import sample_next


def test_top_p_keeps_the_smallest_nucleus_and_logp_is_the_tempered_softmax():
    # probabilities 0.5, 0.3, 0.15, 0.05; top_p 0.7 keeps {0, 1} (0.5 < 0.7 <= 0.8)
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    logits = probs.log().repeat(2000, 1)
    gen = torch.Generator().manual_seed(0)
    tokens, logp = sample_next(logits, temperature=1.0, top_p=0.7, generator=gen)
    counts = torch.bincount(tokens, minlength=4)
    assert counts[2] == counts[3] == 0
    assert abs(counts[0].item() / 2000 - 0.5 / 0.8) < 0.05          # renormalised inside the nucleus
    assert torch.allclose(logp, probs[0].log()[tokens], atol=1e-6)   # log-prob of the full distribution


def test_temperature_and_greedy():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    tok, lp = sample_next(logits, temperature=0.0, top_p=1.0)
    assert tok.item() == 0
    assert math.isclose(lp.item(), torch.log_softmax(logits, -1)[0, 0].item(), rel_tol=1e-6)
    gen = torch.Generator().manual_seed(1)
    tok, lp = sample_next(logits, temperature=0.5, top_p=1.0, generator=gen)
    assert math.isclose(lp.item(), torch.log_softmax(logits / 0.5, -1)[0, tok.item()].item(), rel_tol=1e-6)
    # top_p so small that only the argmax survives
    tok, _ = sample_next(logits.repeat(50, 1), temperature=1.0, top_p=1e-6, generator=gen)
    assert (tok == 0).all()
