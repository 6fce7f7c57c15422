"""Self-inclusion bias of GRPO against TRLOO, measured per turn on a step's rows (paper Sec. 6).

Notation as in `drkernel.rl.advantages`: row (i, t) is turn t of trajectory i, its group the N_t rows
of the same prompt that reached turn t and are not void turns (`drkernel.rl.masks.void_turn_mask`,
the trainer's default), G_{i,t} the reward-to-go. In a group of N_t >= 2,

    A^GRPO_{i,t} = G_{i,t} - mean_{j} G_{j,t} = (N_t - 1) / N_t * A^TRLOO_{i,t},

and a group of one has A^GRPO = 0 while A^TRLOO = G. So GRPO shrinks each advantage by (N_t - 1)/N_t,
and when trajectories stop at different turns the shrinkage differs between turns and groups. Per turn
this module reports

    slope_t    = sum_i A^GRPO A^TRLOO / sum_i (A^TRLOO)^2   (regression of GRPO on TRLOO, through 0)
    expected_t = row-weighted mean of (N_t - 1) / N_t       (the slope if every A^TRLOO were equal)
    n_t        = row-weighted mean of N_t

which is what `benchmarks/toy_advantage_simulation.py` measures against the exact advantage (its
``grpo_expected_slope``; 0.938, 0.931, 0.924 for N = 16 and a 0.1 chance of stopping per turn).
"""

from __future__ import annotations

import math

import torch

from drkernel.rl.advantages import grpo_advantages, trloo_advantages
from drkernel.rl.masks import void_turn_mask
from drkernel.rl.returns import reward_to_go

TOY_GRPO_SLOPE = (0.938, 0.931, 0.924)
"""GRPO's slope per turn in the toy simulation (`benchmarks/toy_advantage_simulation.py --groups 20000
--seed 0`, docs/RL_ALGORITHMS.md: N = 16 trajectories, a 0.1 chance of stopping after each turn)."""


def turn_bias(reward: torch.Tensor, group: torch.Tensor, traj: torch.Tensor, turn: torch.Tensor,
              gamma: float = 1.0) -> dict[int, dict[str, float]]:
    """``{t: {"n": n_t, "slope": slope_t, "expected": expected_t, "rows": rows}}`` for each turn t
    (0-based) with rows in a group; slope is NaN where every TRLOO advantage of the turn is 0.

    Args:
        reward: [R] float, per-turn reward r_{i,t}.
        group, traj, turn: [R] long, as `drkernel.rl.rows.Rows`.
        gamma: the trainer's discount.
    """
    returns = reward_to_go(reward, traj, turn, gamma)  # (R,)
    in_group = void_turn_mask(reward, traj, turn)  # (R,) bool
    a_tr = trloo_advantages(returns, group, turn, in_group)
    a_gr = grpo_advantages(returns, group, turn, in_group)
    out: dict[int, dict[str, float]] = {}
    for t in sorted(set(turn[in_group].tolist())):
        rows = in_group & (turn == t)
        size = torch.zeros_like(reward)
        for g in set(group[rows].tolist()):
            members = rows & (group == g)
            size[members] = float(members.sum())
        n = size[rows]
        denom = float((a_tr[rows] ** 2).sum())
        slope = float((a_gr[rows] * a_tr[rows]).sum()) / denom if denom > 0 else math.nan
        out[int(t)] = {"n": float(n.mean()), "slope": slope, "expected": float(((n - 1) / n).mean()),
                       "rows": float(rows.sum())}
    return out


def bias_metrics(reward: torch.Tensor, group: torch.Tensor, traj: torch.Tensor, turn: torch.Tensor,
                 prefix: str = "gym/org/adv/") -> dict[str, float]:
    """`turn_bias` flattened into metric names (turns counted from 1): ``n_t1``, ``grpo_slope_t1``,
    ``grpo_expected_t1``, ..."""
    out = {}
    for t, v in turn_bias(reward, group, traj, turn).items():
        out[f"{prefix}n_t{t + 1}"] = v["n"]
        out[f"{prefix}grpo_slope_t{t + 1}"] = v["slope"]
        out[f"{prefix}grpo_expected_t{t + 1}"] = v["expected"]
    return out
