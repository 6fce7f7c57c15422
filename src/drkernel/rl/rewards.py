"""The logging summary of a step's per-turn rewards.

The reward itself is defined once, in `drkernel.reward` (torch-free): every turn carries its reward
(`drkernel.agent.episode.Turn.reward`) and the trainer reads it from there (`drkernel.rl.rows`).
"""

from dataclasses import dataclass

import torch


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
