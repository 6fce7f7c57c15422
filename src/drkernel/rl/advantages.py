"""Advantage estimators for multi-turn rows (paper Sec. 6).

Notation: row (i, t) is turn t of trajectory i; its group is (prompt, t), i.e. the N_t
trajectories of the same prompt that reached turn t. G_{i,t} is the reward-to-go
(:func:`drkernel.rl.returns.reward_to_go`), r_{i,t} the per-turn reward.

Every estimator takes an optional ``group_mask`` [R] bool (True = the row is in its group):
rows outside it (void turns) neither enter any baseline nor get an advantage (their A is 0).
Rows dropped from the *loss* by rejection sampling must stay True here: they still count in
the baseline, as the paper prescribes for TRLOO.
"""

import torch

from drkernel.rl._segments import segment_index, segment_sum


def _in_group(values: torch.Tensor, group_mask: torch.Tensor | None) -> torch.Tensor:
    if group_mask is None:
        return torch.ones_like(values, dtype=torch.bool)
    return group_mask


def _zero_outside(values: torch.Tensor, in_group: torch.Tensor) -> torch.Tensor:
    return torch.where(in_group, values, torch.zeros_like(values))


def _leave_one_out(
    values: torch.Tensor, segment: torch.Tensor, num_segments: int, in_group: torch.Tensor
) -> torch.Tensor:
    """v_i - mean_{j != i, same segment} v_j; v_i itself when it is alone; 0 outside the mask."""
    values = _zero_outside(values, in_group)
    count = segment_sum(in_group.to(values.dtype), segment, num_segments)[segment]  # (R,) N_t
    total = segment_sum(values, segment, num_segments)[segment]  # (R,)
    others = count - 1
    baseline = torch.where(others > 0, (total - values) / others.clamp(min=1), torch.zeros_like(values))
    return _zero_outside(values - baseline, in_group)


def trloo_advantages(
    returns: torch.Tensor,
    group_id: torch.Tensor,
    turn: torch.Tensor,
    group_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Turn-level REINFORCE leave-one-out (TRLOO), the paper's estimator.

    A_{i,t} = G_{i,t} - 1/(N_t - 1) sum_{j != i} G_{j,t};  A_{i,t} = G_{i,t} when N_t = 1.
    No std normalisation. The baseline excludes the sample itself, so A is unbiased (Sec. 6).

    Args:
        returns: [R] float, G_{i,t}.
        group_id: [R] long, prompt of each row.
        turn: [R] long, turn index of each row.
        group_mask: [R] bool or None, rows that count in the groups (see module docstring).

    Returns:
        [R] float advantages.
    """
    in_group = _in_group(returns, group_mask)
    segment, num_segments = segment_index(group_id, turn)
    return _leave_one_out(returns, segment, num_segments, in_group)


def turn_independent_advantages(
    reward: torch.Tensor,
    group_id: torch.Tensor,
    turn: torch.Tensor,
    group_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Leave-one-out on each turn's own reward, ignoring later turns (a baseline of Sec. 6).

    A_{i,t} = r_{i,t} - 1/(N_t - 1) sum_{j != i} r_{j,t};  A = r when N_t = 1. Biased for the
    multi-turn objective: an action's effect on later turns is not credited to it.

    Args:
        reward: [R] float, r_{i,t} (not the reward-to-go).
        group_id, turn, group_mask: as in :func:`trloo_advantages`.

    Returns:
        [R] float advantages.
    """
    return trloo_advantages(reward, group_id, turn, group_mask)


def rloo_trajectory_advantages(
    reward: torch.Tensor,
    group_id: torch.Tensor,
    traj_id: torch.Tensor,
    group_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Trajectory-level RLOO: leave-one-out on whole-trajectory returns, broadcast to turns.

    R_i = sum_t r_{i,t};  A_{i,t} = R_i - 1/(N - 1) sum_{j != i} R_j over the N trajectories of
    the prompt; A = R_i when N = 1. Unbiased, but every turn also carries the rewards of the
    turns before it, which adds variance (a baseline of Sec. 6).

    Args:
        reward: [R] float, per-turn reward r_{i,t}.
        group_id: [R] long, prompt of each row.
        traj_id: [R] long, trajectory of each row.
        group_mask: [R] bool or None; rows outside it add nothing to R_i and get A = 0.

    Returns:
        [R] float advantages.
    """
    in_group = _in_group(reward, group_mask)
    traj, num_traj = segment_index(traj_id)
    traj_return = segment_sum(_zero_outside(reward, in_group), traj, num_traj)  # (num_traj,)
    traj_in_group = segment_sum(in_group.to(reward.dtype), traj, num_traj) > 0  # (num_traj,)
    # Prompt of each trajectory: any of its rows says it (all rows of a trajectory share it).
    traj_group = torch.zeros(num_traj, dtype=torch.long, device=reward.device)
    traj_group[traj] = group_id.long()
    segment, num_segments = segment_index(traj_group)
    advantage = _leave_one_out(traj_return, segment, num_segments, traj_in_group)[traj]  # (R,)
    return _zero_outside(advantage, in_group)


def grpo_advantages(
    returns: torch.Tensor,
    group_id: torch.Tensor,
    turn: torch.Tensor,
    group_mask: torch.Tensor | None = None,
    normalize_std: bool = False,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Self-inclusive multi-turn GRPO, the baseline TRLOO fixes.

    A_{i,t} = (G_{i,t} - mean_{j in group} G_{j,t}) [/ (std_{j in group} G_{j,t} + eps)].
    The sample is in its own baseline, so E[A] is (1 - 1/N_t) times the unbiased advantage
    (Sec. 6). The std, when asked for, is Bessel-corrected; a group of one has A = 0.

    Args:
        returns: [R] float, G_{i,t}.
        group_id, turn, group_mask: as in :func:`trloo_advantages`.
        normalize_std: divide by the group's std (GRPO's original form).
        eps: added to the std.

    Returns:
        [R] float advantages.
    """
    in_group = _in_group(returns, group_mask)
    segment, num_segments = segment_index(group_id, turn)
    returns = _zero_outside(returns, in_group)
    count = segment_sum(in_group.to(returns.dtype), segment, num_segments)[segment]  # (R,) N_t
    mean = segment_sum(returns, segment, num_segments)[segment] / count.clamp(min=1)
    centred = _zero_outside(returns - mean, in_group)
    if normalize_std:
        sq = segment_sum(centred.square(), segment, num_segments)[segment]
        std = (sq / (count - 1).clamp(min=1)).sqrt()
        centred = centred / (std + eps)
    return centred
