"""Void turns leave the loss and the baselines but not the returns (docs/RL_ALGORITHMS.md): the
trainer's own advantage step, on hand-worked rows.

Trajectory 0 of prompt 0 scores on turn 0, fails on turn 1 (void) and scores again on turn 2;
trajectory 1 of the same prompt scores only on turn 2:
    traj 0: r = (1, 0, 2)  ->  G = (3, 2, 2)   (turn 2's reward flows through the void turn 1)
    traj 1: r = (0, 0, 1)  ->  G = (1, 1, 1)
TRLOO per (prompt, turn) group, the void turn out of the turn-1 group:
    turn 0: A = 3 - 1 = 2 and 1 - 3 = -2;  turn 1: traj 1 alone, A = G = 1, void A = 0;
    turn 2: A = 2 - 1 = 1 and 1 - 2 = -1.
"""

from types import SimpleNamespace

import pytest
import torch

from drkernel.rl.config import TrainConfig
from drkernel.rl.rows import TurnRecord, collate
from drkernel.rl.trainer import Trainer


def _rows(rewards_by_traj):
    records = [
        TurnRecord(
            group=0, traj=traj, turn=t, prompt_ids=(1,), completion_ids=(2, 3), rollout_logprobs=(-1.0, -1.0), reward=r
        )
        for traj, rewards in enumerate(rewards_by_traj)
        for t, r in enumerate(rewards)
    ]
    return collate(records, pad_id=0)


def _advantages(rewards_by_traj):
    from drkernel.rl.masks import void_turn_mask

    rows = _rows(rewards_by_traj)
    in_group = void_turn_mask(rows.reward, rows.traj, rows.turn)
    host = SimpleNamespace(config=TrainConfig())  # Trainer.advantages reads only the config
    scored = Trainer.advantages(host, rows, torch.zeros(len(rows), 2), in_group, in_group, {})
    return in_group.tolist(), scored.advantages[:, -1].tolist(), scored.metrics["reward/return_mean"]


def test_later_rewards_flow_through_a_void_turn():
    in_group, adv, return_mean = _advantages([[1.0, 0.0, 2.0], [0.0, 0.0, 1.0]])
    assert in_group == [True, False, True, True, True, True]
    assert adv == pytest.approx([2.0, 0.0, 1.0, -2.0, 1.0, -1.0])
    assert return_mean == pytest.approx((3 + 2 + 2 + 1 + 1 + 1) / 6)


def test_a_void_turns_negative_reward_is_charged_to_earlier_turns():
    # tiered shape: the void turn's -0.3 stays in traj 0's returns, G = (2.7, 1.7, 2)
    in_group, adv, _ = _advantages([[1.0, -0.3, 2.0], [0.0, 0.0, 1.0]])
    assert in_group == [True, False, True, True, True, True]
    assert adv[0] == pytest.approx(2.7 - 1.0) and adv[1] == 0.0 and adv[2] == pytest.approx(1.0)
