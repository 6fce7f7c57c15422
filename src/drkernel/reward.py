"""The per-turn reward (paper Sec. 5): one definition, used by the agent (``Turn.reward``), the bench,
test-time scaling, drkernel's trainer and verl's reward function.

Notation, for one evaluated turn:
    c   = 1[correct]            h = 1[hacked]            s = speedup (t_reference / t_solution)
    cov = time coverage when the gym profiled the turn on a GPU, else op coverage (CPU mode)

``profiling`` (the paper's, PR):
    r = 1[c and not h] * (w_correct + w_speedup * min(s, cap) + w_cov * cov)
with w_correct = w_speedup = w_cov = 0.5 and cap = 3, so r is in [0, 2.5].
``tiered`` (a peer's shape): hacked -1, no compile -0.5, incorrect -0.3, else by speedup tier.

A speedup or coverage that was not measured (None or NaN: CPU mode times nothing) contributes 0.
A turn with no result (no code to evaluate, a failed request) scores 0 under either shape.

Plain Python floats, no torch: the bench and the agent import this without loading torch.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from drkernel.errors import ConfigError

if TYPE_CHECKING:
    from drkernel.gym.result import EvalResult


class RewardShape(str, enum.Enum):
    """Which reward function scores a turn."""

    PROFILING = "profiling"
    TIERED = "tiered"


@dataclass(frozen=True)
class TieredRewardConfig:
    """A peer's tiered reward shape, kept as a configurable alternative (Sec. 5)."""

    tiers: tuple[tuple[float, float], ...] = ((3.0, 1.0), (2.0, 0.8), (1.5, 0.6), (1.2, 0.4), (1.0, 0.2))
    """(minimum speedup, reward) pairs for correct turns, highest threshold first."""
    slow: float = 0.0
    """Correct but below every tier (or not timed)."""
    incorrect: float = -0.3
    """Compiled but wrong."""
    no_compile: float = -0.5
    """Did not compile (or did not load)."""
    hacked: float = -1.0
    """Flagged as a reward hack, whatever else it did."""

    def __post_init__(self) -> None:
        thresholds = [t for t, _ in self.tiers]
        if thresholds != sorted(thresholds, reverse=True):
            raise ConfigError(
                f"TieredRewardConfig.tiers must be ordered by threshold, highest first: {self.tiers}"
            )


@dataclass(frozen=True)
class RewardConfig:
    """The reward of a turn: its shape and weights; defaults are the paper's."""

    shape: RewardShape = RewardShape.PROFILING
    """``profiling`` (the paper's profiling-based reward) or ``tiered``."""
    correct_weight: float = 0.5
    """``profiling``: paid for a correct, non-hacked turn."""
    speedup_weight: float = 0.5
    """``profiling``: multiplies the capped speedup."""
    speedup_cap: float = 3.0
    """``profiling``: speedups above this count as this."""
    coverage_weight: float = 0.5
    """``profiling``: w_cov, multiplies the coverage of a correct turn (0 turns PR off)."""
    tiered: TieredRewardConfig = field(default_factory=TieredRewardConfig)
    """``tiered``: the tiers and penalties."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", RewardShape(self.shape))  # a YAML string or the enum
        if self.speedup_cap <= 0:
            raise ConfigError(f"invalid RewardConfig: speedup_cap={self.speedup_cap} (> 0)")


def _measured(x: float | None) -> float:
    """0 for a measure that was not taken (None or NaN)."""
    return 0.0 if x is None or not math.isfinite(x) else float(x)


def profiling_reward(
    correct: bool, speedup: float | None, coverage: float | None, hacked: bool, config: RewardConfig = RewardConfig()
) -> float:
    """r = 1[correct and not hacked] * (w_correct + w_speedup * min(speedup, cap) + w_cov * coverage)."""
    if not correct or hacked:
        return 0.0
    speed = min(_measured(speedup), config.speedup_cap)
    return config.correct_weight + config.speedup_weight * speed + config.coverage_weight * _measured(coverage)


def tiered_reward(
    compiled: bool, correct: bool, speedup: float | None, hacked: bool, config: TieredRewardConfig = TieredRewardConfig()
) -> float:
    """Hacked -1, no compile -0.5, incorrect -0.3; a correct turn gets its highest tier's reward
    (1.0 / 0.8 / 0.6 / 0.4 / 0.2 for speedup >= 3 / 2 / 1.5 / 1.2 / 1), else ``slow``."""
    if hacked:
        return config.hacked
    if not compiled:
        return config.no_compile
    if not correct:
        return config.incorrect
    speed = _measured(speedup)
    return next((value for threshold, value in config.tiers if speed >= threshold), config.slow)


def reward_coverage(result: "EvalResult") -> float | None:
    """The coverage the reward pays for: time coverage when profiled on a GPU, else op coverage."""
    return result.time_coverage if result.time_coverage is not None else result.op_coverage


def turn_reward(result: "EvalResult | None", config: RewardConfig = RewardConfig()) -> float:
    """The reward of one evaluated turn; ``None`` (no code to evaluate) scores 0."""
    if result is None:
        return 0.0
    if config.shape is RewardShape.TIERED:
        return tiered_reward(bool(result.compiled), bool(result.correct), result.speedup, result.hacked, config.tiered)
    return profiling_reward(bool(result.correct), result.speedup, reward_coverage(result), result.hacked, config)
