import math

import pytest
import torch

from drkernel.rl.advantages import (
    grpo_advantages,
    rloo_trajectory_advantages,
    trloo_advantages,
    turn_independent_advantages,
)


def _random_rows(seed: int, num_groups: int = 6, samples: int = 5, max_turns: int = 3):
    """Rows of `samples` trajectories per prompt, 1..max_turns turns each, shuffled, with a mask."""
    g = torch.Generator().manual_seed(seed)
    group, traj, turn = [], [], []
    for p in range(num_groups):
        for s in range(samples):
            length = int(torch.randint(1, max_turns + 1, (1,), generator=g))
            group += [p * 3] * length
            traj += [p * samples + s] * length
            turn += list(range(length))
    order = torch.randperm(len(traj), generator=g)
    value = torch.randn(len(traj), generator=g, dtype=torch.float64)[order]
    in_group = torch.rand(len(traj), generator=g)[order] > 0.2
    return value, torch.tensor(group)[order], torch.tensor(traj)[order], torch.tensor(turn)[order], in_group


def _loop_leave_one_out(value, keys, in_group):
    """v_i - mean of the other in-group rows with the same key; v_i alone; 0 outside the mask."""
    out = []
    for i in range(len(value)):
        if not in_group[i]:
            out.append(0.0)
            continue
        others = [float(value[j]) for j in range(len(value)) if j != i and in_group[j] and keys[j] == keys[i]]
        out.append(float(value[i]) - (sum(others) / len(others) if others else 0.0))
    return torch.tensor(out, dtype=value.dtype)


def _loop_grpo(value, keys, in_group, normalize_std):
    out = []
    for i in range(len(value)):
        members = [float(value[j]) for j in range(len(value)) if in_group[j] and keys[j] == keys[i]]
        if not in_group[i]:
            out.append(0.0)
            continue
        mean = sum(members) / len(members)
        a = float(value[i]) - mean
        if normalize_std:
            var = sum((m - mean) ** 2 for m in members) / max(len(members) - 1, 1)
            a /= math.sqrt(var) + 1e-6
        out.append(a)
    return torch.tensor(out, dtype=value.dtype)


# One prompt, turn 0 reached by 4 trajectories with G = (1, 2, 3, 6); turn 1 by trajectory 3 only.
RETURNS = torch.tensor([1.0, 2.0, 3.0, 6.0, 4.0])
GROUP = torch.tensor([0, 0, 0, 0, 0])
TURN = torch.tensor([0, 0, 0, 0, 1])


def test_trloo_hand_worked():
    # A_i = G_i - mean of the other three:  1 - 11/3 = -8/3,  2 - 10/3 = -4/3,  3 - 9/3 = 0,
    # 6 - 6/3 = 4.  Turn 1 has N_t = 1, so A = G = 4.
    expected = torch.tensor([-8 / 3, -4 / 3, 0.0, 4.0, 4.0])
    torch.testing.assert_close(trloo_advantages(RETURNS, GROUP, TURN), expected)


def test_trloo_group_mask_drops_rows_from_baseline():
    # Row 3 (G = 6) is a void turn: out of the baseline, A = 0. Others: 1 - 2.5, 2 - 2, 3 - 1.5.
    group_mask = torch.tensor([True, True, True, False, True])
    expected = torch.tensor([-1.5, 0.0, 1.5, 0.0, 4.0])
    torch.testing.assert_close(trloo_advantages(RETURNS, GROUP, TURN, group_mask), expected)


def test_grpo_hand_worked():
    # Mean at turn 0 is 3: A = (-2, -1, 0, 3); turn 1 alone: A = 4 - 4 = 0.
    # With std: Bessel std = sqrt((4 + 1 + 0 + 9) / 3) = sqrt(14/3); the lone row stays 0.
    torch.testing.assert_close(
        grpo_advantages(RETURNS, GROUP, TURN), torch.tensor([-2.0, -1.0, 0.0, 3.0, 0.0])
    )
    std = math.sqrt(14 / 3) + 1e-6
    expected = torch.tensor([-2 / std, -1 / std, 0.0, 3 / std, 0.0])
    torch.testing.assert_close(grpo_advantages(RETURNS, GROUP, TURN, normalize_std=True), expected)


def test_grpo_is_shrunk_trloo():
    # Self-inclusive: G_i - mean_all = (N-1)/N * (G_i - mean_others). Here N = 4: 3/4.
    rows = slice(0, 4)
    torch.testing.assert_close(
        grpo_advantages(RETURNS, GROUP, TURN)[rows], 0.75 * trloo_advantages(RETURNS, GROUP, TURN)[rows]
    )


def test_rloo_trajectory_hand_worked():
    # Trajectory 10: r = (1, 0) -> R = 1;  trajectory 11: r = (0.5) -> R = 0.5;
    # trajectory 12: r = (2, 1) -> R = 3.  Prompt 7 holds all three.
    # A_10 = 1 - (0.5 + 3)/2 = -0.75;  A_11 = 0.5 - (1 + 3)/2 = -1.5;  A_12 = 3 - 0.75 = 2.25,
    # each broadcast to every turn of its trajectory.
    reward = torch.tensor([1.0, 0.0, 0.5, 2.0, 1.0])
    group = torch.full((5,), 7)
    traj = torch.tensor([10, 10, 11, 12, 12])
    expected = torch.tensor([-0.75, -0.75, -1.5, 2.25, 2.25])
    torch.testing.assert_close(rloo_trajectory_advantages(reward, group, traj), expected)


def test_turn_independent_is_leave_one_out_on_reward():
    # Rewards (1, 0, 0, 1) at turn 0: 1 - 1/3 = 2/3, 0 - 2/3, 0 - 2/3, 1 - 1/3.  Turn 1 alone: 5.
    reward = torch.tensor([1.0, 0.0, 0.0, 1.0, 5.0])
    expected = torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3, 5.0])
    torch.testing.assert_close(turn_independent_advantages(reward, GROUP, TURN), expected)


@pytest.mark.parametrize("seed", [0, 1])
def test_turn_level_estimators_match_loop(seed):
    value, group, traj, turn, in_group = _random_rows(seed)
    keys = list(zip(group.tolist(), turn.tolist(), strict=True))
    loo = _loop_leave_one_out(value, keys, in_group)
    torch.testing.assert_close(trloo_advantages(value, group, turn, in_group), loo)
    torch.testing.assert_close(turn_independent_advantages(value, group, turn, in_group), loo)
    for normalize_std in (False, True):
        torch.testing.assert_close(
            grpo_advantages(value, group, turn, in_group, normalize_std=normalize_std),
            _loop_grpo(value, keys, in_group, normalize_std),
        )


@pytest.mark.parametrize("seed", [0, 1])
def test_rloo_trajectory_matches_loop(seed):
    reward, group, traj, turn, in_group = _random_rows(seed)
    traj_return = {}
    for i in range(len(reward)):
        if in_group[i]:
            traj_return[int(traj[i])] = traj_return.get(int(traj[i]), 0.0) + float(reward[i])
    traj_group = {int(traj[i]): int(group[i]) for i in range(len(reward))}
    expected = []
    for i in range(len(reward)):
        if not in_group[i]:
            expected.append(0.0)
            continue
        mine = int(traj[i])
        others = [r for t, r in traj_return.items() if t != mine and traj_group[t] == traj_group[mine]]
        expected.append(traj_return[mine] - (sum(others) / len(others) if others else 0.0))
    actual = rloo_trajectory_advantages(reward, group, traj, in_group)
    torch.testing.assert_close(actual, torch.tensor(expected, dtype=reward.dtype))


def test_estimators_do_not_mutate_inputs():
    value, group, traj, turn, in_group = _random_rows(3)
    copies = [t.clone() for t in (value, group, traj, turn, in_group)]
    trloo_advantages(value, group, turn, in_group)
    grpo_advantages(value, group, turn, in_group, normalize_std=True)
    rloo_trajectory_advantages(value, group, traj, in_group)
    for before, after in zip(copies, (value, group, traj, turn, in_group), strict=True):
        assert torch.equal(before, after)
