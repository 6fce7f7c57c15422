import torch

from drkernel.rl.masks import masked_mean, void_turn_mask


def test_masked_mean_hand_worked():
    # Row 0 counts 1 and 3 -> 2; row 1 counts only 10 -> 10; everything: (1+3+10)/3 = 14/3.
    values = torch.tensor([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    mask = torch.tensor([[True, False, True], [True, False, False]])
    torch.testing.assert_close(masked_mean(values, mask), torch.tensor(14 / 3))
    torch.testing.assert_close(masked_mean(values, mask, dim=-1), torch.tensor([2.0, 10.0]))


def test_masked_mean_empty_is_zero_and_ignores_nan_outside_mask():
    values = torch.tensor([[float("nan"), 4.0], [float("inf"), 1.0]])
    mask = torch.tensor([[False, True], [False, False]])
    torch.testing.assert_close(masked_mean(values, mask), torch.tensor(4.0))
    torch.testing.assert_close(masked_mean(values, mask, dim=-1), torch.tensor([4.0, 0.0]))


def test_masked_mean_broadcast_mask():
    # A [B, 1] mask selects whole rows: mean of row 1 = (3 + 5) / 2 = 4.
    values = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    mask = torch.tensor([[False], [True]])
    torch.testing.assert_close(masked_mean(values, mask), torch.tensor(4.0))


def test_void_turn_mask_hand_worked():
    # Trajectory 0, turns 0..4 with rewards (0, 1, 0, -0.3, 2): the first positive turn is 1, so
    # turns 2 (0) and 3 (-0.3) are void; turn 4 is positive and stays. Turn 0 precedes it: stays.
    # Trajectory 1: rewards (0, 0): never positive, nothing is void.
    reward = torch.tensor([0.0, 1.0, 0.0, -0.3, 2.0, 0.0, 0.0])
    traj_id = torch.tensor([0, 0, 0, 0, 0, 1, 1])
    turn = torch.tensor([0, 1, 2, 3, 4, 0, 1])
    expected = torch.tensor([True, True, False, False, True, True, True])
    assert torch.equal(void_turn_mask(reward, traj_id, turn), expected)
    # Row order does not matter.
    order = torch.tensor([6, 3, 0, 5, 2, 4, 1])
    assert torch.equal(void_turn_mask(reward[order], traj_id[order], turn[order]), expected[order])


def test_void_turn_mask_matches_loop():
    g = torch.Generator().manual_seed(0)
    num_rows = 300
    traj_id = torch.randint(0, 60, (num_rows,), generator=g)
    turn = torch.randperm(num_rows, generator=g)  # distinct, so distinct within a trajectory
    reward = torch.randint(-1, 2, (num_rows,), generator=g).float()  # -1, 0 or 1
    expected = []
    for i in range(num_rows):
        earlier_positive = any(
            traj_id[k] == traj_id[i] and turn[k] < turn[i] and reward[k] > 0 for k in range(num_rows)
        )
        expected.append(not (earlier_positive and reward[i] <= 0))
    assert torch.equal(void_turn_mask(reward, traj_id, turn), torch.tensor(expected))
