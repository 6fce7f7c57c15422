"""Rollout-vs-trainer mismatch: importance weights and mismatch rejection sampling (Sec. 6).

The rollout engine and the trainer compute slightly different log-probs for the same tokens.
Notation: l = logp_train - logp_rollout per token (``log_r`` in code); B rows (turns), T tokens
per row; a trajectory is the set of rows sharing ``traj_id``. Inputs are treated as constants:
every result is detached.
"""

import enum
import math
from dataclasses import dataclass

import torch

from drkernel.rl._segments import segment_index, segment_sum
from drkernel.rl.masks import masked_mean


class WeightLevel(str, enum.Enum):
    """Granularity of an importance weight."""

    TOKEN = "token"
    """exp(l) per token."""
    TURN = "turn"
    """exp(sum of l over the row)."""
    TURN_GEOMETRIC = "turn-geometric"
    """exp(mean of l over the row)."""
    SEQUENCE = "sequence"
    """exp(sum of l over all rows of the trajectory)."""
    GEOMETRIC = "geometric"
    """exp(mean of l over all tokens of the trajectory)."""


@dataclass(frozen=True)
class MismatchStats:
    """Detached summary of the mismatch of one batch."""

    mean_abs_log_ratio: float
    """Mean |l| over counted tokens."""
    max_abs_log_ratio: float
    """Max |l| over counted tokens."""
    rejected_fraction: float
    """Fraction of rows that mismatch rejection dropped."""

    def to_metrics(self) -> dict[str, float]:
        """Metrics named ``mismatch/<field>``."""
        return {f"mismatch/{name}": float(value) for name, value in vars(self).items()}


def log_ratio(logp_train: torch.Tensor, logp_rollout: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """l = logp_train - logp_rollout on counted tokens, 0 elsewhere; all [B, T], detached."""
    diff = (logp_train - logp_rollout).detach()
    return torch.where(mask, diff, torch.zeros_like(diff))


def _trajectory_log_ratio(
    log_r: torch.Tensor, mask: torch.Tensor, traj_id: torch.Tensor, mean: bool
) -> torch.Tensor:
    """Sum (or mean) of l over all tokens of each row's trajectory -> [B]."""
    traj, num_traj = segment_index(traj_id)
    total = segment_sum(log_r.sum(dim=-1), traj, num_traj)[traj]  # (B,)
    if not mean:
        return total
    count = segment_sum(mask.sum(dim=-1).to(log_r.dtype), traj, num_traj)[traj]  # (B,)
    return total / count.clamp(min=1)


def importance_weights(
    logp_train: torch.Tensor,
    logp_rollout: torch.Tensor,
    mask: torch.Tensor,
    traj_id: torch.Tensor,
    level: WeightLevel | str = WeightLevel.TOKEN,
    upper: float = 2.0,
) -> torch.Tensor:
    """Truncated importance weights trainer/rollout at the chosen level.

    w = min(exp(L), upper) with L = l (token), sum_row l (turn), mean_row l (turn-geometric),
    sum_traj l (sequence) or mean_traj l (geometric); Sec. 6, "mismatch correction".

    Args:
        logp_train: [B, T] float, trainer log-probs of the sampled tokens.
        logp_rollout: [B, T] float, rollout-engine log-probs of the same tokens.
        mask: [B, T] bool, True = the token counts.
        traj_id: [B] long, trajectory of each row (read by the trajectory levels only).
        level: a :class:`WeightLevel` or its string value.
        upper: truncation bound (the paper's 2.0).

    Returns:
        [B, T] float weights, row-level ones repeated over the row's tokens; at token level a
        token that does not count has weight 1. Detached.
    """
    level = WeightLevel(level)
    log_r = log_ratio(logp_train, logp_rollout, mask)  # (B, T)
    if level is WeightLevel.TOKEN:
        log_w = log_r
    elif level is WeightLevel.TURN:
        log_w = log_r.sum(dim=-1, keepdim=True)  # (B, 1)
    elif level is WeightLevel.TURN_GEOMETRIC:
        log_w = masked_mean(log_r, mask, dim=-1).unsqueeze(-1)  # (B, 1)
    else:
        log_w = _trajectory_log_ratio(log_r, mask, traj_id, mean=level is WeightLevel.GEOMETRIC)
        log_w = log_w.unsqueeze(-1)  # (B, 1)
    # Clamp in log space so that a long sequence's exp(sum) cannot overflow to inf.
    return torch.exp(log_w.clamp(max=math.log(upper))).expand_as(log_r)


def mismatch_rejection(
    logp_train: torch.Tensor,
    logp_rollout: torch.Tensor,
    mask: torch.Tensor,
    traj_id: torch.Tensor,
    low: float = 0.999,
    high: float = 1.001,
    token_veto: float = 1e-4,
) -> torch.Tensor:
    """Mismatch rejection sampling (MRS): which rows to keep in the loss.

    keep_row = low <= exp(mean_traj l) <= high  and  min_row exp(l) >= token_veto (Sec. 6):
    the geometric-mean test drops whole trajectories, the token veto drops single turns.

    Args:
        logp_train, logp_rollout, mask, traj_id: as in :func:`importance_weights`.
        low, high: bounds on the trajectory's geometric-mean ratio.
        token_veto: a row with any counted token ratio below this is dropped.

    Returns:
        [B] bool, True = keep the row.
    """
    log_r = log_ratio(logp_train, logp_rollout, mask)  # (B, T)
    geometric = torch.exp(_trajectory_log_ratio(log_r, mask, traj_id, mean=True))  # (B,)
    trajectory_ok = (geometric >= low) & (geometric <= high)
    vetoed = (mask & (log_r < math.log(token_veto))).any(dim=-1)  # (B,)
    return trajectory_ok & ~vetoed


def mismatch_stats(
    logp_train: torch.Tensor, logp_rollout: torch.Tensor, mask: torch.Tensor, keep: torch.Tensor
) -> MismatchStats:
    """Summary for logging; ``keep`` [B] bool is :func:`mismatch_rejection`'s result."""
    abs_l = log_ratio(logp_train, logp_rollout, mask).abs()  # (B, T), 0 where not counted
    return MismatchStats(
        mean_abs_log_ratio=masked_mean(abs_l, mask).item(),
        max_abs_log_ratio=abs_l.max().item() if abs_l.numel() else 0.0,
        rejected_fraction=(~keep).float().mean().item() if keep.numel() else 0.0,
    )
