"""Masks and the one masked mean of the RL code.

Convention everywhere in ``drkernel.rl``: a boolean mask is True where the entry *counts*
(a token in the loss, a row in a group baseline, a kept turn).
"""

import torch

from drkernel.rl._segments import segment_amin, segment_index


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` over the entries where ``mask`` is True.

    Args:
        values: any shape, float.
        mask: bool, broadcastable to ``values``.
        dim: reduce this dimension only; None reduces everything to a scalar.

    Returns:
        sum(values * mask) / max(sum(mask), 1): an empty selection gives 0, not NaN. Masked-out
        entries never reach the sum, so a NaN or inf there does not leak into the result.
    """
    mask = mask.expand_as(values)
    kept = torch.where(mask, values, torch.zeros_like(values))
    if dim is None:
        return kept.sum() / mask.sum().clamp(min=1)
    return kept.sum(dim) / mask.sum(dim).clamp(min=1)


def void_turn_mask(reward: torch.Tensor, traj_id: torch.Tensor, turn: torch.Tensor) -> torch.Tensor:
    """Rows that are not void turns (paper Sec. 6, "void turns").

    Once a trajectory had a turn with reward > 0, each of its later turns with reward <= 0 is
    void: it is excluded from the loss and from the group baselines.

    Args:
        reward: [R] float, the row's own (per-turn) reward.
        traj_id: [R] long, trajectory of each row.
        turn: [R] long, turn index of each row within its trajectory.

    Returns:
        [R] bool, False for void turns: ``~(turn > min{turn' : reward' > 0} and reward <= 0)``.
    """
    traj, num_traj = segment_index(traj_id)
    turn = turn.double()
    positive_turn = torch.where(reward > 0, turn, torch.full_like(turn, float("inf")))
    first_positive = segment_amin(positive_turn, traj, num_traj)[traj]  # (R,)
    void = (turn > first_positive) & (reward <= 0)
    return ~void
