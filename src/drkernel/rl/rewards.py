"""Per-turn rewards from evaluation outcomes (paper Sec. 5) and their logging summary.

Inputs are plain Python scalars or tensors of one shape (one entry per turn); results are float
tensors of that shape (0-d for scalars). A speedup or coverage that is None or NaN (e.g. CPU mode,
where nothing is timed or profiled) contributes 0.
"""

from dataclasses import dataclass

import torch

Scalar = bool | int | float | None


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the profiling-based reward; defaults are the paper's."""

    correct_weight: float = 0.5
    """Paid for a correct, non-hacked turn."""
    speedup_weight: float = 0.5
    """Multiplies the capped speedup."""
    speedup_cap: float = 3.0
    """Speedups above this count as this."""
    coverage_weight: float = 0.5
    """w_cov: multiplies the time coverage of a correct turn (the profiling-based reward, PR)."""


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
            raise ValueError(
                f"TieredRewardConfig.tiers must be ordered by threshold, highest first: {self.tiers}"
            )


@dataclass(frozen=True)
class RewardStats:
    """Detached summary of a batch of per-turn rewards."""

    mean: float
    std: float
    max: float
    correct_fraction: float
    hacked_fraction: float

    def to_metrics(self) -> dict[str, float]:
        """Metrics named ``reward/<field>``."""
        return {f"reward/{name}": float(value) for name, value in vars(self).items()}


def _flag(x: torch.Tensor | Scalar) -> torch.Tensor:
    return torch.as_tensor(False if x is None else x).bool()


def _measure(x: torch.Tensor | Scalar) -> torch.Tensor:
    """A float tensor with None / NaN replaced by 0."""
    value = torch.as_tensor(float("nan") if x is None else x, dtype=torch.get_default_dtype())
    return torch.nan_to_num(value, nan=0.0)


def profiling_reward(
    correct: torch.Tensor | Scalar,
    speedup: torch.Tensor | Scalar,
    time_coverage: torch.Tensor | Scalar,
    hacked: torch.Tensor | Scalar,
    config: RewardConfig = RewardConfig(),
) -> torch.Tensor:
    """The paper's per-turn reward, in [0, 2.5] with the default weights.

    r = 1[correct and not hacked] * (0.5 + 0.5 * min(speedup, 3) + 0.5 * time_coverage) (Sec. 5).

    Args:
        correct: bool (scalar or tensor), the turn passed the correctness checks.
        speedup: float, t_reference / t_solution; None / NaN = not timed.
        time_coverage: float in [0, 1]; None / NaN = not profiled.
        hacked: bool, the turn was flagged as a reward hack.
        config: the weights.

    Returns:
        float tensor of the broadcast shape of the inputs.
    """
    paid = _flag(correct) & ~_flag(hacked)
    speed = torch.clamp(_measure(speedup), max=config.speedup_cap)
    reward = (
        config.correct_weight
        + config.speedup_weight * speed
        + config.coverage_weight * _measure(time_coverage)
    )
    return torch.where(paid, reward, torch.zeros_like(reward))


def tiered_reward(
    compiled: torch.Tensor | Scalar,
    correct: torch.Tensor | Scalar,
    speedup: torch.Tensor | Scalar,
    hacked: torch.Tensor | Scalar,
    config: TieredRewardConfig = TieredRewardConfig(),
) -> torch.Tensor:
    """Tiered reward: hacked -1, no compile -0.5, incorrect -0.3, else by speedup tier (Sec. 5).

    Correct turns get 1.0 / 0.8 / 0.6 / 0.4 / 0.2 for speedup >= 3 / 2 / 1.5 / 1.2 / 1, else 0.

    Args:
        compiled, correct, hacked: bool (scalar or tensor).
        speedup: float; None / NaN = not timed (a correct turn then gets ``config.slow``).
        config: the tiers and penalties.

    Returns:
        float tensor of the broadcast shape of the inputs.
    """
    speed = _measure(speedup)
    reward = torch.full_like(speed, config.slow)
    # Lowest tier first, so that each higher tier overwrites the ones below it.
    for threshold, value in reversed(config.tiers):
        reward = torch.where(speed >= threshold, torch.full_like(reward, value), reward)
    reward = torch.where(_flag(correct), reward, torch.full_like(reward, config.incorrect))
    reward = torch.where(_flag(compiled), reward, torch.full_like(reward, config.no_compile))
    return torch.where(_flag(hacked), torch.full_like(reward, config.hacked), reward)


def reward_stats(reward: torch.Tensor, correct: torch.Tensor, hacked: torch.Tensor) -> RewardStats:
    """Summary of [R] rewards with their [R] bool correctness and hack flags, for logging."""
    reward = reward.detach().double()
    return RewardStats(
        mean=reward.mean().item(),
        std=reward.std(correction=0).item(),
        max=reward.max().item(),
        correct_fraction=correct.double().mean().item(),
        hacked_fraction=hacked.double().mean().item(),
    )
