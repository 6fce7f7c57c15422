"""Clipping that acts, in real training steps of the tiny model on CPU.

With one epoch and one mini-batch the PPO ratio is exactly 1 at the only optimizer step, so neither
the clip nor the dual clip can act. With several mini-batches the later ones are trained on log-probs
that moved since the rollout: the paper config's update schedule (4 mini-batches per batch, ours;
the paper updates once) clips tokens of the tiny model's sanity task. Rollouts
from a stale policy put negative-advantage tokens past the dual clip bound c = 3, where the loss is
the constant -A * c and their gradient is 0.

Also here: mismatch rejection (MRS) on real rollouts, with a perturbation it must catch.
"""

import dataclasses
from pathlib import Path

import pytest
import torch

from drkernel.rl.config import load_config
from drkernel.rl.losses import ppo_policy_loss
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"
SMALL = ["run.progress=false", "rollout.prompts_per_step=4", "rollout.samples_per_prompt=4"]


def _trainer(tmp_path, *overrides: str) -> Trainer:
    return Trainer(load_config(CONFIGS / "sanity_cpu.yaml", [f"run.output_dir={tmp_path}", *SMALL, *overrides]),
                   build_env)


def _scored_with_spread_rewards(trainer: Trainer):
    """A real rollout whose rewards differ within every group (0, 0.5, 1, 0, ...), so A != 0."""
    torch.manual_seed(0)
    batch = trainer.rollout()
    batch.records = [dataclasses.replace(r, reward=(i % 3) / 2) for i, r in enumerate(batch.records)]
    return trainer.score(batch)


def test_the_shipped_paper_schedule_clips(tmp_path):
    optim = load_config(CONFIGS / "paper_qwen3_8b.yaml").optim
    assert optim.mini_batches * optim.epochs == 4  # as shipped
    trainer = _trainer(tmp_path, f"optim.mini_batches={optim.mini_batches}", f"optim.epochs={optim.epochs}")
    try:
        metrics = trainer.update(_scored_with_spread_rewards(trainer))
    finally:
        trainer.close()
    assert metrics["loss/optimizer_steps"] == 4
    assert metrics["loss/clip_fraction"] > 0


def test_one_update_per_batch_never_clips(tmp_path):
    # The control: the paper's single update per batch has ratio 1 on every token.
    trainer = _trainer(tmp_path, "optim.mini_batches=1")
    try:
        metrics = trainer.update(_scored_with_spread_rewards(trainer))
    finally:
        trainer.close()
    assert metrics["loss/optimizer_steps"] == 1
    assert metrics["loss/clip_fraction"] == 0 and metrics["loss/dual_clip_fraction"] == 0
    assert metrics["loss/ratio_mean"] == 1.0


def test_dual_clip_bounds_negative_advantage_tokens(tmp_path):
    # Stale rollouts (the dual clip's case): the behaviour policy gave the negative-advantage rows'
    # tokens a fifth of the probability the trainer gives them now, so their ratio starts at 5 > c = 3.
    trainer = _trainer(tmp_path, "optim.mini_batches=1")
    try:
        scored = _scored_with_spread_rewards(trainer)
        mask, a = scored.rows.completion_mask, trainer.config.algorithm
        negative = mask & (scored.advantages < 0)  # (R, C)
        scored.old_logp = torch.where(negative, scored.old_logp - torch.log(torch.tensor(5.0)), scored.old_logp)
        logp = trainer.logprobs(scored.rows).detach().requires_grad_()  # (R, C), before the update
        metrics = trainer.update(scored)
    finally:
        trainer.close()
    # one micro-batch holds every row: the fraction is over all its tokens
    assert metrics["loss/dual_clip_fraction"] == pytest.approx((negative.sum() / mask.sum()).item(), abs=1e-6)
    assert metrics["loss/dual_clip_fraction"] > 0
    loss, _ = ppo_policy_loss(
        logp, scored.old_logp, scored.advantages, mask, a.clip_low, a.clip_high, a.dual_clip, a.loss_agg
    )
    loss.backward()
    assert logp.grad[negative].abs().max() == 0  # bounded: -A * c does not grow with the ratio
    assert logp.grad[mask & (scored.advantages > 0)].abs().min() > 0  # the other tokens still train


def test_mrs_rejects_exactly_the_perturbed_trajectory(tmp_path):
    # The rollout log-probs come from generation (incremental decoding with a KV cache), the
    # trainer's from one full forward pass; MRS keeps them all when they agree within its bounds.
    trainer = _trainer(tmp_path)
    try:
        torch.manual_seed(0)
        batch = trainer.rollout()
        clean = trainer.score(batch)
        # Trajectory 5 claims each token 1 % likelier than it was: geometric-mean ratio 0.990 < 0.999.
        batch.records[5] = dataclasses.replace(
            batch.records[5], rollout_logprobs=tuple(x + 0.01 for x in batch.records[5].rollout_logprobs)
        )
        perturbed = trainer.score(batch)
    finally:
        trainer.close()
    assert clean.metrics["mismatch/rejected_fraction"] == 0 and clean.loss_rows.all()
    assert perturbed.metrics["mismatch/rejected_fraction"] == pytest.approx(1 / len(batch.records))
    assert perturbed.loss_rows.tolist() == [i != 5 for i in range(len(batch.records))]
