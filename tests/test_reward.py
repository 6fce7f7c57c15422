"""The one per-turn reward (`drkernel.reward`): hand-worked values, both shapes, the coverage it pays
for, and the import that must not load torch."""

import subprocess
import sys

import pytest

from drkernel.errors import ConfigError
from drkernel.gym import EvalResult, Hack, Status
from drkernel.gym.result import TrialResult
from drkernel.reward import (
    RewardConfig,
    RewardShape,
    TieredRewardConfig,
    profiling_reward,
    reward_coverage,
    tiered_reward,
    turn_reward,
)

NAN = float("nan")
HACK = Hack(code=2, name="pytorch_passthrough", evidence="", message="")


def result(status=Status.CORRECT, **kw) -> EvalResult:
    return EvalResult(status=status, **kw).finalize()


@pytest.mark.parametrize(
    ("correct", "speedup", "coverage", "hacked", "expected"),
    [
        (True, 2.0, 0.5, False, 0.5 + 0.5 * 2.0 + 0.5 * 0.5),  # 1.75
        (True, 10.0, 1.0, False, 0.5 + 0.5 * 3.0 + 0.5 * 1.0),  # capped: the maximum, 2.5
        (True, 0.5, 0.0, False, 0.5 + 0.25),  # slower than the reference: 0.75
        (True, None, None, False, 0.5),  # CPU mode: nothing timed or profiled
        (True, NAN, NAN, False, 0.5),
        (False, 2.0, 0.5, False, 0.0),  # incorrect
        (True, 2.0, 0.5, True, 0.0),  # hacked
    ],
)
def test_profiling_reward_hand_worked(correct, speedup, coverage, hacked, expected):
    assert profiling_reward(correct, speedup, coverage, hacked) == pytest.approx(expected)


def test_profiling_reward_weights():
    # w_cov = 0 turns PR off: 0.5 + 0.5 * 1.0; cap 2: 0.5 + 0.5 * 2 + 0.5 * 0.2
    assert profiling_reward(True, 1.0, 0.2, False, RewardConfig(coverage_weight=0.0)) == pytest.approx(1.0)
    assert profiling_reward(True, 5.0, 0.2, False, RewardConfig(speedup_cap=2.0)) == pytest.approx(1.6)


@pytest.mark.parametrize(
    ("compiled", "correct", "speedup", "hacked", "expected"),
    [
        (True, True, 3.0, False, 1.0),
        (True, True, 2.5, False, 0.8),
        (True, True, 1.5, False, 0.6),
        (True, True, 1.2, False, 0.4),
        (True, True, 1.0, False, 0.2),
        (True, True, 0.9, False, 0.0),
        (True, True, None, False, 0.0),
        (True, True, NAN, False, 0.0),
        (True, False, None, False, -0.3),
        (False, False, None, False, -0.5),
        (True, True, 5.0, True, -1.0),
    ],
)
def test_tiered_reward_hand_worked(compiled, correct, speedup, hacked, expected):
    assert tiered_reward(compiled, correct, speedup, hacked) == pytest.approx(expected)


def test_tiered_config_rejects_unordered_tiers():
    with pytest.raises(ConfigError, match="highest first"):
        TieredRewardConfig(tiers=((1.0, 0.2), (2.0, 0.8)))


def test_turn_reward_of_results():
    # GPU: 0.5 + 0.5 * min(4.0, 3) + 0.5 * 0.6 = 2.3 (time coverage wins over op coverage)
    assert turn_reward(result(speedup=4.0, time_coverage=0.6, op_coverage=0.1)) == pytest.approx(2.3)
    # CPU: no timing, op coverage stands in: 0.5 + 0.5 * 0.8 = 0.9
    assert turn_reward(result(op_coverage=0.8)) == pytest.approx(0.9)
    assert turn_reward(result()) == 0.5
    assert turn_reward(result(Status.INCORRECT, speedup=2.0)) == 0.0
    assert turn_reward(result(speedup=2.0, hacks=[HACK])) == 0.0
    assert turn_reward(None) == 0.0
    tiered = RewardConfig(shape=RewardShape.TIERED)
    assert turn_reward(result(speedup=1.6), tiered) == pytest.approx(0.6)
    assert turn_reward(result(Status.INCORRECT), tiered) == pytest.approx(-0.3)
    assert turn_reward(result(Status.COMPILE_ERROR), tiered) == pytest.approx(-0.5)
    assert turn_reward(result(speedup=9.0, hacks=[HACK]), tiered) == -1.0
    assert turn_reward(None, tiered) == 0.0


def test_reward_coverage_prefers_time_coverage():
    assert reward_coverage(result(time_coverage=0.3, op_coverage=0.9)) == 0.3
    assert reward_coverage(result(op_coverage=0.9)) == 0.9
    assert reward_coverage(result()) is None


def test_shape_from_a_string_and_bad_values():
    assert RewardConfig(shape="tiered").shape is RewardShape.TIERED  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        RewardConfig(shape="linear")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="speedup_cap"):
        RewardConfig(speedup_cap=0.0)
    with pytest.raises(AttributeError):
        RewardConfig().speedup_cap = 5.0  # type: ignore[misc]


def test_reward_module_does_not_import_torch():
    code = "import sys, drkernel.reward; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_degenerate_problem_pays_nothing_but_a_hack_still_costs():
    # the judge found a trivial answer within the reference's tolerance: a fill kernel and an honest
    # kernel get the same verdict there, so neither is paid, under either shape
    def trials(*degenerate):
        return [TrialResult(trial=i, seed=i, passed=True, degenerate=d) for i, d in enumerate(degenerate)]

    zeros = "all-zero output within tolerance"
    for config in (RewardConfig(), RewardConfig(shape=RewardShape.TIERED)):
        assert turn_reward(result(speedup=4.0, time_coverage=1.0, trials=trials(zeros, zeros)), config) == 0.0
        # one trial on which the reference is not trivial decides: the verdict tells work from no work
        assert turn_reward(result(speedup=4.0, time_coverage=1.0, trials=trials(zeros, None)), config) > 0.0
        assert turn_reward(result(speedup=4.0, time_coverage=1.0), config) > 0.0
    tiered = RewardConfig(shape=RewardShape.TIERED)
    assert turn_reward(result(speedup=9.0, hacks=[HACK], trials=trials(zeros)), tiered) == -1.0
