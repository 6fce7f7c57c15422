"""Gradient accumulation: micro-batches of one row give the gradient of one batch of all rows."""

import dataclasses
from pathlib import Path

import pytest
import torch

from drkernel.rl.config import load_config
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


@pytest.mark.parametrize("agg", ["seq-mean-token-sum", "token-mean"])
def test_accumulated_gradient_equals_full_batch(tmp_path, agg):
    config = load_config(
        CONFIGS / "sanity_cpu.yaml",
        [
            f"run.output_dir={tmp_path}",
            "run.progress=false",
            "model.tiny_hidden=32",
            "rollout.prompts_per_step=2",
            "rollout.samples_per_prompt=4",
            "rollout.max_tokens=6",
            f"algorithm.loss_agg={agg}",
        ],
    )
    trainer = Trainer(config, build_env)
    try:
        torch.manual_seed(0)
        batch = trainer.rollout()
        batch.records[0] = dataclasses.replace(batch.records[0], reward=1.0)  # some advantage signal
        scored = trainer.score(batch)
        rows = torch.arange(8)
        assert scored.loss_rows.all()

        def gradient(micro_rows: int) -> tuple[list[torch.Tensor], dict]:
            trainer.optimizer.zero_grad(set_to_none=True)
            trainer.config = dataclasses.replace(
                config, optim=dataclasses.replace(config.optim, micro_batch_rows=micro_rows)
            )
            stats = trainer._accumulate(scored, rows, config.algorithm)
            return [p.grad.clone() for p in trainer.model.parameters()], stats

        full, full_stats = gradient(8)
        accumulated, acc_stats = gradient(1)
        uneven, _ = gradient(3)  # micro-batches of 3, 3 and 2 rows
    finally:
        trainer.close()
    assert any(g.abs().sum() > 0 for g in full)
    # Accumulation only reorders float32 sums: the bound is n rounding steps of the largest summand
    # (n = tokens in the batch), whatever the CPU's vector width or thread count reorders. A wrong
    # scale (a micro-batch not divided, a row counted twice) is off by a whole term, far above it.
    n_tokens = float(full_stats["loss/num_tokens"])
    eps = torch.finfo(torch.float32).eps
    for a, b, c in zip(accumulated, full, uneven):
        atol = n_tokens * eps * float(b.abs().max())
        torch.testing.assert_close(a, b, atol=atol, rtol=1e-4)
        torch.testing.assert_close(c, b, atol=atol, rtol=1e-4)
    term = float(scored.advantages.abs().max())  # |A * ratio| at ratio 1, the largest loss term
    assert term > 0
    loss_atol = n_tokens * eps * term
    assert acc_stats["loss/loss"] == pytest.approx(full_stats["loss/loss"], rel=1e-4, abs=loss_atol)
    assert acc_stats["loss/num_tokens"] == full_stats["loss/num_tokens"]
