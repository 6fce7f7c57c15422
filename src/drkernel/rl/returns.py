"""Multi-turn returns over turn-level rows (paper Sec. 6)."""

import torch

from drkernel.rl._segments import segment_index


def reward_to_go(
    reward: torch.Tensor, traj_id: torch.Tensor, turn: torch.Tensor, gamma: float = 1.0
) -> torch.Tensor:
    """Discounted reward-to-go of every turn-level row.

    G_{i,t} = sum_{k >= t} gamma^(k - t) r_{i,k}, summed over the rows of trajectory i (Sec. 6).

    Args:
        reward: [R] float, per-turn reward r_{i,t}.
        traj_id: [R] long, trajectory of each row; rows may come in any order.
        turn: [R] long, turn index t; distinct within a trajectory, gaps allowed (the exponent
            is the difference of turn indices).
        gamma: discount; the paper uses 1.

    Returns:
        [R] float, G in the rows' original order.
    """
    traj, _ = segment_index(traj_id)
    # Sort rows by (trajectory, turn): two stable sorts, minor key first.
    by_turn = torch.sort(turn, stable=True).indices
    order = by_turn[torch.sort(traj[by_turn], stable=True).indices]
    r, tr, t = reward[order], traj[order], turn[order]  # (R,) each, sorted

    # The row after each row, if it belongs to the same trajectory, is its next turn.
    same_traj = tr[1:] == tr[:-1]  # (R-1,)
    step = (t[1:] - t[:-1]).to(reward.dtype)
    if bool((same_traj & (step <= 0)).any()):
        raise ValueError("reward_to_go: a trajectory has two rows with the same turn index")
    discount = torch.where(same_traj, torch.pow(gamma, step), torch.zeros_like(step))

    # G_t = r_t + gamma^(dt) G_{t+1}: one backward sweep per turn of the longest trajectory.
    max_len = int(torch.bincount(traj).max().item()) if traj.numel() else 0
    g = r.clone()
    for _ in range(max_len - 1):
        g = torch.cat([r[:-1] + discount * g[1:], r[-1:]])

    out = torch.empty_like(g)
    out[order] = g
    return out
