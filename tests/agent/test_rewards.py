import pytest

from drkernel.agent.rewards import turn_reward
from drkernel.gym import EvalResult, Hack, Status


def result(status, **kw):
    return EvalResult(status=status, **kw).finalize()


def test_profiling_reward_by_hand():
    # 0.5 + 0.5 * min(4.0, 3) + 0.5 * 0.6 = 2.3
    assert turn_reward(result(Status.CORRECT, speedup=4.0, time_coverage=0.6)) == pytest.approx(2.3)
    # CPU mode: no timing, no profiling -> 0.5
    assert turn_reward(result(Status.CORRECT)) == 0.5
    assert turn_reward(result(Status.INCORRECT, speedup=2.0)) == 0.0
    hacked = result(
        Status.CORRECT, speedup=2.0, hacks=[Hack(code=2, name="pytorch_passthrough", evidence="", message="")]
    )
    assert turn_reward(hacked) == 0.0
    assert turn_reward(None) == 0.0


def test_tiered_reward_by_hand():
    assert turn_reward(result(Status.CORRECT, speedup=1.6), "tiered") == pytest.approx(0.6)
    assert turn_reward(result(Status.INCORRECT), "tiered") == pytest.approx(-0.3)
    assert turn_reward(result(Status.COMPILE_ERROR), "tiered") == pytest.approx(-0.5)
    assert turn_reward(None, "tiered") == 0.0
