"""Checkpoint and resume: an interrupted run continued from its checkpoint equals an uninterrupted one."""

from pathlib import Path

import torch

from drkernel.rl.checkpoint import checkpoint_dir, latest_checkpoint
from drkernel.rl.config import load_config
from drkernel.rl.metrics_log import read_metrics
from drkernel.rl.trainer import Trainer
from drkernel.tasks import build_env

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"
SMALL = [
    "run.progress=false",
    "model.tiny_hidden=32",
    "rollout.prompts_per_step=2",
    "rollout.samples_per_prompt=4",
    "rollout.max_tokens=4",
    "optim.micro_batch_rows=3",
    "optim.mini_batches=2",
    "optim.warmup_steps=2",
    "run.keep_checkpoints=1",
]


def _run(out: Path, steps: int, extra: list[str] = ()) -> Trainer:
    config = load_config(
        CONFIGS / "sanity_cpu.yaml", [f"run.output_dir={out}", f"run.steps={steps}", *SMALL, *extra]
    )
    trainer = Trainer(config, build_env)
    try:
        trainer.train()
    finally:
        trainer.close()
    return trainer


def test_resumed_run_equals_uninterrupted(tmp_path):
    straight = _run(tmp_path / "straight", 3, ["run.save_every=100"])
    _run(tmp_path / "resumed", 2, ["run.save_every=100"])  # "interrupted" after step 2 (saved at its end)
    resumed = _run(tmp_path / "resumed", 3, ["run.save_every=100"])

    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert straight.scheduler.state_dict() == resumed.scheduler.state_dict()
    m_straight, m_resumed = (
        read_metrics(tmp_path / "straight/metrics.jsonl"),
        read_metrics(tmp_path / "resumed/metrics.jsonl"),
    )
    assert [r["step"] for r in m_resumed] == [1, 2, 3]
    for key in ("reward/mean", "loss/loss", "loss/grad_norm"):
        assert m_straight[-1][key] == m_resumed[-1][key], key
    # keep_checkpoints=1: only the newest remains, and `latest` points at it.
    assert [p.name for p in checkpoint_dir(tmp_path / "resumed").glob("step_*")] == ["step_000003"]
    assert latest_checkpoint(tmp_path / "resumed").name == "step_000003"


def test_finished_run_does_nothing_and_fresh_restarts(tmp_path):
    _run(tmp_path, 1)
    again = _run(tmp_path, 1)
    assert again.step == 1 and len(read_metrics(tmp_path / "metrics.jsonl")) == 1
    fresh = _run(tmp_path, 1, ["run.resume=false"])
    assert fresh.step == 1 and len(read_metrics(tmp_path / "metrics.jsonl")) == 1
