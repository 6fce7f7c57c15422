import pytest
import torch

from drkernel.rl.returns import reward_to_go


def _random_rows(seed: int, num_traj: int = 40, max_turns: int = 4):
    """Trajectories of 1..max_turns turns (some with gaps in the turn index), rows shuffled."""
    g = torch.Generator().manual_seed(seed)
    traj, turn = [], []
    for i in range(num_traj):
        length = int(torch.randint(1, max_turns + 1, (1,), generator=g))
        turns = torch.randperm(max_turns + 2, generator=g)[:length].sort().values
        traj += [i * 7] * length  # ids need not be dense
        turn += turns.tolist()
    order = torch.randperm(len(traj), generator=g)
    reward = torch.randn(len(traj), generator=g, dtype=torch.float64)
    return reward, torch.tensor(traj)[order], torch.tensor(turn)[order]


def _loop_reward_to_go(reward, traj_id, turn, gamma):
    out = []
    for i in range(len(reward)):
        total = 0.0
        for k in range(len(reward)):
            if traj_id[k] == traj_id[i] and turn[k] >= turn[i]:
                total += gamma ** int(turn[k] - turn[i]) * float(reward[k])
        out.append(total)
    return torch.tensor(out, dtype=reward.dtype)


def test_hand_worked_three_turns():
    # Trajectory 0: r = (1, 0, 2) at turns 0, 1, 2; trajectory 1: one turn, r = 0.5.
    # gamma = 1:   G = (1+0+2, 0+2, 2) = (3, 2, 2);  G = 0.5.
    # gamma = 0.5: G_2 = 2, G_1 = 0 + 0.5*2 = 1, G_0 = 1 + 0.5*1 = 1.5.
    reward = torch.tensor([1.0, 0.0, 2.0, 0.5])
    traj_id = torch.tensor([0, 0, 0, 1])
    turn = torch.tensor([0, 1, 2, 0])
    torch.testing.assert_close(reward_to_go(reward, traj_id, turn), torch.tensor([3.0, 2.0, 2.0, 0.5]))
    torch.testing.assert_close(
        reward_to_go(reward, traj_id, turn, gamma=0.5), torch.tensor([1.5, 1.0, 2.0, 0.5])
    )


def test_row_order_and_turn_gaps():
    # Same trajectory as above, rows reversed and interleaved with another trajectory; turns 0 and
    # 2 only (turn 1 missing): G_0 = r_0 + gamma^2 r_2 = 1 + 0.25 * 2 = 1.5.
    reward = torch.tensor([2.0, 5.0, 1.0])
    traj_id = torch.tensor([3, 9, 3])
    turn = torch.tensor([2, 0, 0])
    torch.testing.assert_close(reward_to_go(reward, traj_id, turn, gamma=0.5), torch.tensor([2.0, 5.0, 1.5]))


def test_duplicate_turn_is_an_error():
    with pytest.raises(ValueError, match="same turn"):
        reward_to_go(torch.ones(2), torch.tensor([0, 0]), torch.tensor([1, 1]))


@pytest.mark.parametrize("gamma", [1.0, 0.9, 0.0])
def test_matches_loop_on_random_rows(gamma):
    reward, traj_id, turn = _random_rows(seed=int(gamma * 10))
    expected = _loop_reward_to_go(reward, traj_id, turn, gamma)
    torch.testing.assert_close(reward_to_go(reward, traj_id, turn, gamma), expected)


def test_does_not_mutate_inputs():
    reward, traj_id, turn = _random_rows(seed=1)
    copies = [t.clone() for t in (reward, traj_id, turn)]
    reward_to_go(reward, traj_id, turn, 0.9)
    for before, after in zip(copies, (reward, traj_id, turn), strict=True):
        assert torch.equal(before, after)
