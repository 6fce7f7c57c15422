"""The logging summary of a step's rewards (the reward itself: tests/test_reward.py)."""

import math

import pytest
import torch

from drkernel.rl.rewards import reward_stats


def test_reward_stats_hand_worked():
    # Rewards (0, 1, 2, 1): mean 1, population std sqrt(0.5), max 2; 3 of 4 correct, 1 hacked.
    stats = reward_stats(
        torch.tensor([0.0, 1.0, 2.0, 1.0]),
        torch.tensor([False, True, True, True]),
        torch.tensor([True, False, False, False]),
    )
    assert (stats.mean, stats.max, stats.correct_fraction, stats.hacked_fraction) == (1.0, 2.0, 0.75, 0.25)
    assert stats.std == pytest.approx(math.sqrt(0.5))
    assert set(stats.to_metrics()) == {
        "reward/mean",
        "reward/std",
        "reward/max",
        "reward/correct_fraction",
        "reward/hacked_fraction",
    }
