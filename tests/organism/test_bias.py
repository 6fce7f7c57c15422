"""GRPO's self-inclusion shrinkage measured per turn (hand-worked and against a loop), and early
stopping giving the organism's groups a varying N_t."""

import asyncio
import random

import pytest
import torch

from drkernel.agent.policies.base import Completion
from drkernel.gym import EvalConfig
from drkernel.gym.result import EvalResult, Status
from drkernel.organism.bias import turn_bias
from drkernel.organism.env import EnvSettings, EvalCache, OrganismEnv
from drkernel.organism.families import generate, to_problem
from drkernel.reward import RewardConfig


def test_hand_worked_two_turns():
    # one prompt: turn 1 rewards 1, 0, 0.5 (N = 3); trajectories 0 and 1 go on to turn 2 with 0.2 and
    # 0.4 (N = 2). GRPO = (N - 1)/N x TRLOO in each group: slope 2/3 at turn 1 and 1/2 at turn 2.
    r = torch.tensor([1.0, 0.0, 0.5, 0.2, 0.4], dtype=torch.float64)
    g, traj, turn = torch.tensor([0, 0, 0, 0, 0]), torch.tensor([0, 1, 2, 0, 1]), torch.tensor([0, 0, 0, 1, 1])
    out = turn_bias(r, g, traj, turn)
    assert out[0]["n"] == 3 and out[0]["slope"] == pytest.approx(2 / 3) and out[0]["expected"] == pytest.approx(2 / 3)
    assert out[1]["n"] == 2 and out[1]["slope"] == pytest.approx(1 / 2)


def _loop(reward, group, traj, turn):
    """The same numbers with plain Python over the rows (no void turns: every reward is positive)."""
    rows = list(zip(reward.tolist(), group.tolist(), traj.tolist(), turn.tolist()))
    ret = {(tr, t): sum(r2 for r2, _, tr2, t2 in rows if tr2 == tr and t2 >= t) for _, _, tr, t in rows}
    out = {}
    for t in sorted({t for *_, t in rows}):
        num = den = 0.0
        ns, shrink = [], []
        for _, gi, tr, ti in rows:
            if ti != t:
                continue
            mates = [ret[(tr2, t)] for _, g2, tr2, t2 in rows if g2 == gi and t2 == t]
            n, own = len(mates), ret[(tr, t)]
            a_tr = own - (sum(mates) - own) / (n - 1) if n > 1 else own
            a_gr = own - sum(mates) / n
            num, den = num + a_gr * a_tr, den + a_tr * a_tr
            ns.append(n)
            shrink.append((n - 1) / n)
        out[t] = (sum(ns) / len(ns), num / den, sum(shrink) / len(shrink))
    return out


@pytest.mark.parametrize("case", range(5))
def test_turn_bias_matches_a_loop(case):
    rng = random.Random(case)
    reward, group, traj, turn = [], [], [], []
    for tr in range(12):
        for t in range(rng.randint(1, 3)):  # trajectories of 1-3 turns: N_t varies
            reward.append(rng.uniform(0.1, 2.0))
            group.append(tr // 4)
            traj.append(tr)
            turn.append(t)
    args = (torch.tensor(reward, dtype=torch.float64), torch.tensor(group), torch.tensor(traj), torch.tensor(turn))
    got, want = turn_bias(*args), _loop(*args)
    assert sorted(got) == sorted(want)
    for t, (n, slope, expected) in want.items():
        assert got[t]["n"] == pytest.approx(n) and got[t]["slope"] == pytest.approx(slope)
        assert got[t]["expected"] == pytest.approx(expected)


class _Program:
    async def generate(self, histories, sampling):
        return [Completion(text="triton relu", token_ids=[1], prompt_token_ids=[1], logprobs=[0.0])
                for _ in histories]


class _Judge:
    """An in-memory evaluator: every program correct with full coverage (no gym needed for this)."""

    def __init__(self):
        self.requests = 0

    async def evaluate_batch(self, requests):
        self.requests += len(requests)
        return [EvalResult(status=Status.CORRECT, op_coverage=1.0).finalize() for _ in requests]


def test_early_stopping_shrinks_later_groups_and_the_step_reports_the_bias():
    spec = generate("train", 1, seed=1, families=("ew2",))[0]
    config = EvalConfig(device="cpu", trials=1, second_size=False, timing=False)
    settings = EnvSettings(prompts_per_step=2, samples_per_prompt=8, turns=3, integrity=True,
                           reward=RewardConfig(), eval_config=config, stop_p=0.5)
    env = OrganismEnv([to_problem(spec)], _Judge(), settings, None, EvalCache())
    step = asyncio.run(env.rollout(_Program(), 0))
    per_turn = [sum(r.turn == t for r in step.records) for t in range(3)]
    assert per_turn[0] == 16 and per_turn[0] > per_turn[1] > per_turn[2] > 0, per_turn
    m = step.metrics
    assert m["gym/org/adv/n_t1"] == 8.0 and m["gym/org/adv/n_t2"] < 8.0
    assert m["gym/org/adv/grpo_expected_t1"] == pytest.approx(7 / 8)
    again = asyncio.run(env.rollout(_Program(), 0))  # the same stops for the same step (resumable)
    assert [r.traj for r in again.records] == [r.traj for r in step.records]
    no_stop = OrganismEnv([to_problem(spec)], _Judge(), EnvSettings(**{**vars(settings), "stop_p": 0.0}),
                          None, EvalCache())
    assert len(asyncio.run(no_stop.rollout(_Program(), 0)).records) == 48
