import math

import pytest
import torch

from drkernel.rl.rewards import (
    RewardConfig,
    TieredRewardConfig,
    profiling_reward,
    reward_stats,
    tiered_reward,
)

NAN = float("nan")


@pytest.mark.parametrize(
    ("correct", "speedup", "coverage", "hacked", "expected"),
    [
        (True, 2.0, 0.5, False, 0.5 + 0.5 * 2.0 + 0.5 * 0.5),  # 1.75
        (True, 10.0, 1.0, False, 0.5 + 0.5 * 3.0 + 0.5 * 1.0),  # capped: the maximum, 2.5
        (True, 0.5, 0.0, False, 0.5 + 0.25),  # slower than the reference: 0.75
        (True, None, None, False, 0.5),  # CPU mode: nothing timed or profiled
        (True, NAN, NAN, False, 0.5),
        (False, 2.0, 0.5, False, 0.0),  # incorrect
        (True, 2.0, 0.5, True, 0.0),  # hacked
    ],
)
def test_profiling_reward_hand_worked(correct, speedup, coverage, hacked, expected):
    assert profiling_reward(correct, speedup, coverage, hacked).item() == pytest.approx(expected)


def test_profiling_reward_on_tensors_and_custom_weights():
    correct = torch.tensor([True, True, False])
    speedup = torch.tensor([1.0, NAN, 4.0])
    coverage = torch.tensor([0.2, 0.8, 1.0])
    hacked = torch.tensor([False, False, False])
    # 0.5 + 0.5*1 + 0.5*0.2 = 1.1;  0.5 + 0 + 0.5*0.8 = 0.9;  incorrect: 0.
    torch.testing.assert_close(
        profiling_reward(correct, speedup, coverage, hacked), torch.tensor([1.1, 0.9, 0.0])
    )
    # Without the profiling term (w_cov = 0): 1.0, 0.5, 0.
    no_cov = RewardConfig(coverage_weight=0.0)
    torch.testing.assert_close(
        profiling_reward(correct, speedup, coverage, hacked, no_cov), torch.tensor([1.0, 0.5, 0.0])
    )


@pytest.mark.parametrize(
    ("compiled", "correct", "speedup", "hacked", "expected"),
    [
        (True, True, 3.0, False, 1.0),
        (True, True, 2.5, False, 0.8),
        (True, True, 1.5, False, 0.6),
        (True, True, 1.2, False, 0.4),
        (True, True, 1.0, False, 0.2),
        (True, True, 0.9, False, 0.0),
        (True, True, None, False, 0.0),
        (True, False, None, False, -0.3),
        (False, False, None, False, -0.5),
        (True, True, 5.0, True, -1.0),
    ],
)
def test_tiered_reward_hand_worked(compiled, correct, speedup, hacked, expected):
    assert tiered_reward(compiled, correct, speedup, hacked).item() == pytest.approx(expected)


def test_tiered_reward_on_tensors():
    compiled = torch.tensor([True, True, False, True])
    correct = torch.tensor([True, False, False, True])
    speedup = torch.tensor([2.0, NAN, NAN, 1.19])
    hacked = torch.tensor([False, False, False, False])
    torch.testing.assert_close(
        tiered_reward(compiled, correct, speedup, hacked), torch.tensor([0.8, -0.3, -0.5, 0.2])
    )


def test_tiered_config_rejects_unordered_tiers():
    with pytest.raises(ValueError, match="highest first"):
        TieredRewardConfig(tiers=((1.0, 0.2), (2.0, 0.8)))


def test_configs_are_frozen():
    with pytest.raises(AttributeError):
        RewardConfig().speedup_cap = 5.0  # type: ignore[misc]


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
