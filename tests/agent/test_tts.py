"""Window selection for sequential test-time scaling, worked by hand."""

import pytest

from drkernel.agent.episode import Turn
from drkernel.agent.tts import TTSConfig, select_window
from drkernel.errors import ConfigError
from drkernel.gym import EvalResult, Status


def turn(i, reward=0.0, speedup=None, coverage=None, valid=True):
    status = Status.CORRECT if valid else Status.INCORRECT
    r = EvalResult(status=status, speedup=speedup, time_coverage=coverage).finalize()
    return Turn(index=i, context=[], messages=[], response=f"a{i}", result=r, reward=reward)


def test_window_by_reward_speedup_coverage_and_last():
    turns = [
        turn(0, 1.0, 1.1, 0.9),
        turn(1, 2.0, 2.5, 0.2),
        turn(2, 0.0, 9.0, 0.9, valid=False),
        turn(3, 1.5, 0.5, 0.95),
        turn(4, 0.0, None, None, valid=False),
    ]
    # reward sums of windows of 2: (0,1)=3.0 (1,2)=2.0 (2,3)=1.5 (3,4)=1.5
    assert select_window(turns, 2, "reward") == [0, 1]
    # speedup (valid only; turn 2's 9.0 does not count): (0,1)=3.6 (1,2)=2.5 (2,3)=0.5 (3,4)=0.5
    assert select_window(turns, 2, "speedup") == [0, 1]
    # coverage: (0,1)=1.1 (1,2)=0.2 (2,3)=0.95 (3,4)=0.95
    assert select_window(turns, 2, "coverage") == [0, 1]
    # windows of 3 by coverage: (0..2)=1.1, (1..3)=1.15, (2..4)=0.95
    assert select_window(turns, 3, "coverage") == [1, 2, 3]
    assert select_window(turns, 2, "last") == [3, 4]
    assert select_window(turns[:2], 4, "reward") == [0, 1]


def test_ties_go_to_the_latest_window():
    turns = [turn(i, 1.0) for i in range(5)]
    assert select_window(turns, 2, "reward") == [3, 4]


def test_paper_setting_and_parsing():
    cfg = TTSConfig.parse("first=5,iterations=10,window=4,select=speedup")
    assert (cfg.first_turns, cfg.iterations, cfg.window, cfg.select, cfg.total_turns) == (
        5,
        10,
        4,
        "speedup",
        14,
    )
    with pytest.raises(ConfigError, match="expected key=value"):
        TTSConfig.parse("windows=4")
    with pytest.raises(ConfigError, match="select='best'"):
        TTSConfig(select="best")
