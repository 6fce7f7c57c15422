"""Turn records from episodes (the turn's own reward, scored once) and their left-padded tensor layout."""

import math

import pytest
import torch

from drkernel.agent.episode import Episode, Turn
from drkernel.errors import ConfigError
from drkernel.gym.result import EvalResult, Hack, Status
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig, score_turn
from drkernel.rl.rows import TurnRecord, collate, records_from_episodes

PROBLEM = Problem(name="p", level=1, code="class Model: pass")


def _result(status=Status.CORRECT, **kw) -> EvalResult:
    return EvalResult(status=status, **kw).finalize()


def _turn(i, result, tokens=(5, 6), finish="stop", reward=RewardConfig()) -> Turn:
    score = score_turn(result, reward, policy_error=finish == "error")  # what the episode runner stores
    return Turn(
        index=i,
        context=[],
        messages=[],
        response="r",
        finish_reason=finish,
        token_ids=list(tokens),
        prompt_token_ids=[1, 2, 3],
        logprobs=[-0.5] * len(tokens),
        result=result,
        reward=score.reward,
        outcome=score.outcome.value,
    )


def test_rewards_by_hand():
    gpu = _result(speedup=4.0, time_coverage=0.6)  # 0.5 + 0.5 * min(4, 3) + 0.5 * 0.6 = 2.3
    cpu = _result(op_coverage=0.8)  # no timing: 0.5 + 0 + 0.5 * 0.8 = 0.9
    hacked = _result(
        speedup=2.0, time_coverage=1.0, hacks=[Hack(code=1, name="decoy_kernel", evidence="", message="")]
    )
    wrong = _result(Status.INCORRECT)
    episodes = [
        Episode(problem=PROBLEM, sample=0, prompt=[], turns=[_turn(0, gpu), _turn(1, cpu)]),
        Episode(
            problem=PROBLEM, sample=1, prompt=[], turns=[_turn(0, hacked), _turn(1, wrong), _turn(2, None)]
        ),
        Episode(problem=PROBLEM, sample=0, prompt=[], turns=[_turn(0, None, tokens=(), finish="error")]),
    ]
    records = records_from_episodes(episodes, samples_per_prompt=2)
    assert [(r.group, r.traj, r.turn) for r in records] == [
        (0, 0, 0),
        (0, 0, 1),
        (0, 1, 0),
        (0, 1, 1),
        (0, 1, 2),
    ]
    assert [round(r.reward, 6) for r in records] == [2.3, 0.9, 0.0, 0.0, 0.0]
    assert [r.coverage for r in records[:3]] == [0.6, 0.8, 1.0]
    assert math.isnan(records[1].speedup) and math.isnan(records[3].coverage)
    assert [r.correct for r in records] == [True, True, True, False, False]
    assert [r.hacked for r in records] == [False, False, True, False, False]
    no_pr = RewardConfig(coverage_weight=0.0)
    turns = [_turn(0, gpu, reward=no_pr), _turn(1, cpu, reward=no_pr)]
    no_cov = Episode(problem=PROBLEM, sample=0, prompt=[], turns=turns)
    assert [r.reward for r in records_from_episodes([no_cov], 2)] == [2.0, 0.5]  # PR off


def test_the_record_carries_the_turns_own_reward():
    # Whatever scored the turn (here a number no reward function gives for this result) is trained on.
    turn = _turn(0, _result(op_coverage=0.8))
    turn.reward = 0.123
    (record,) = records_from_episodes([Episode(problem=PROBLEM, sample=0, prompt=[], turns=[turn])], 1)
    assert record.reward == 0.123


def test_turn_without_tokens_is_a_config_error():
    turn = _turn(0, None)
    turn.logprobs = None
    with pytest.raises(ConfigError, match="token ids or log-probs"):
        records_from_episodes([Episode(problem=PROBLEM, sample=0, prompt=[], turns=[turn])], 1)


def test_collate_left_pads_and_right_aligns_completions():
    a = TurnRecord(
        group=0,
        traj=0,
        turn=0,
        prompt_ids=(1,),
        completion_ids=(7, 8, 9),
        rollout_logprobs=(-1.0, -2.0, -3.0),
        reward=1.0,
    )
    b = TurnRecord(
        group=0,
        traj=1,
        turn=0,
        prompt_ids=(1, 2, 3, 4),
        completion_ids=(5,),
        rollout_logprobs=(-0.5,),
        reward=0.0,
        coverage=0.4,
    )
    rows = collate([a, b], pad_id=0)
    # a has 4 tokens, b has 5: a gets one pad on the left.
    assert rows.input_ids.tolist() == [[0, 1, 7, 8, 9], [1, 2, 3, 4, 5]]
    assert rows.attention_mask.tolist() == [[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]]
    assert rows.completion_ids.tolist() == [[7, 8, 9], [0, 0, 5]]
    assert rows.completion_mask.tolist() == [[True, True, True], [False, False, True]]
    assert rows.rollout_logprobs.tolist() == [[-1.0, -2.0, -3.0], [0.0, 0.0, -0.5]]
    assert rows.coverage[1].item() == pytest.approx(0.4) and math.isnan(rows.coverage[0].item())
    # The completion occupies the last columns of input_ids in every row.
    assert torch.equal(
        rows.input_ids[:, -3:][rows.completion_mask], rows.completion_ids[rows.completion_mask]
    )
    sub = rows.select(torch.tensor([1]))
    assert sub.input_ids.tolist() == [[1, 2, 3, 4, 5]] and sub.completion_ids.tolist() == [[5]]
    sub = rows.select(torch.tensor([0]))
    assert sub.input_ids.tolist() == [[1, 7, 8, 9]] and sub.completion_mask.tolist() == [[True, True, True]]


def test_record_rejects_length_mismatch():
    with pytest.raises(ValueError, match="log-probs"):
        TurnRecord(
            group=0,
            traj=0,
            turn=0,
            prompt_ids=(1,),
            completion_ids=(2, 3),
            rollout_logprobs=(-1.0,),
            reward=0.0,
        )
