"""Learning sanity: from a random init, the trainer raises the mean format reward (digits only).

The benchmark (benchmarks/train_sanity.py) runs the full config and plots the curve; this is the
shorter version with a looser bar. A sign error in the advantage or the loss, a broken update or
log-probs that do not match the sampled tokens keep the reward at its random level (~0.02).
"""

from pathlib import Path

from drkernel.rl.config import load_config
from drkernel.rl.envs import format_reward
from drkernel.tasks import train

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "train"


def test_format_reward_by_hand():
    assert format_reward("42", "0123456789") == 1.0
    assert format_reward(" 4a ", "0123456789") == 0.5  # spaces do not count: 1 of 2 characters
    assert format_reward("", "0123456789") == 0.0
    assert format_reward("abc", "0123456789") == 0.0


def test_mean_reward_rises_from_scratch(tmp_path):
    config = load_config(
        CONFIGS / "sanity_cpu.yaml", [f"run.output_dir={tmp_path}", "run.steps=20", "run.progress=false"]
    )
    history = train(config)
    rewards = [m["reward/mean"] for m in history]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert first < 0.1, rewards  # a random-init model rarely answers with digits
    assert last > 0.3 and last > 4 * first, rewards
    assert all(m["mismatch/rejected_fraction"] == 0 for m in history)  # shared weights: MRS keeps all
