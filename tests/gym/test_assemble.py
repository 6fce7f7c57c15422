"""The verdict from typed facts: the status order, validity, and the speedup withheld when the two
sides did not run at the declared precision; its interval and sol_fraction when they did."""

from dataclasses import replace

import pytest

from drkernel.gym.speedup import RUN_TO_RUN

from drkernel.gym.precision import BASELINE_FLAGS
from drkernel.gym.result import Hack, Status, TimingStats, TrialResult
from drkernel.gym.roofline import Work
from drkernel.gym.verdict.assemble import (CandidateFacts, CheckFacts, ErrorReport, Facts, RequestFacts,
                                           TimingFacts, assemble)

REQ = RequestFacts("p", "r", "kernelgym", "lenient", {}, "src", "h", device="cuda:0",
                   device_name="NVIDIA H100 80GB HBM3", cpu_mode=False, backend_flags=BASELINE_FLAGS)
PASS = (TrialResult(0, 11, True), TrialResult(1, 12, True))
DONE = CandidateFacts(PASS, planned_trials=2, finished=True, solution_flags=BASELINE_FLAGS, timeout_s=300)


def stats(median: float) -> TimingStats:
    return TimingStats(median_ms=median, iqr_ms=0.0, cv=0.0, mean_ms=median, min_ms=median, n=10)


TIMED = TimingFacts(None, stats(14.5), stats(9.5), tuple(range(10, 20)), tuple(range(5, 15)))


def test_status_order_timeout_before_a_failed_trial_before_death():
    failed = (TrialResult(0, 11, True), TrialResult(1, 12, False, message="bad"))
    assert assemble(Facts(REQ, replace(DONE, timed_out=True))).status is Status.TIMEOUT
    r = assemble(Facts(REQ, replace(DONE, trials=failed, died=True)))
    assert r.status is Status.INCORRECT and r.error.startswith("trial 1 (primary size, seed 12): bad")
    assert assemble(Facts(REQ, replace(DONE, finished=False, returncode=-11))).status is Status.CRASHED
    assert assemble(Facts(REQ, replace(DONE, trials=PASS[:1]))).status is Status.CRASHED  # a trial missing
    e = ErrorReport("compile", "CompilationError", "bad", "Traceback ...\nCompilationError: bad")
    assert assemble(Facts(REQ, replace(DONE, error=e))).status is Status.COMPILE_ERROR


def test_valid_needs_correct_and_no_counted_hack():
    hack = Hack(2, "pytorch_passthrough", "aten::mm", "m", strict_only=True)
    r = assemble(Facts(REQ, DONE, CheckFacts((hack,))))
    assert r.valid and r.valid_lenient and not r.valid_strict
    blocked = assemble(Facts(REQ, None, CheckFacts((Hack(1, "x", "e", "no"),), blocked=True)))
    assert blocked.status is Status.REJECTED and blocked.error == "no" and not blocked.valid


def test_speedup_interval_and_sol_fraction():
    r = assemble(Facts(REQ, DONE, timing=TIMED, work=Work(0.0, 6.7e9, 0.0)))
    assert r.speedup == pytest.approx(14.5 / 9.5)
    # the samples' order-statistic bounds (11/13, 3.0), widened by the run-to-run share on each side
    assert r.speedup_ci == (pytest.approx(11 / 13 * (1 - RUN_TO_RUN)), pytest.approx(3.0 * (1 + RUN_TO_RUN)))
    assert r.speedup_ci_level == 0.95
    assert r.roofline_ms == pytest.approx(0.1) and r.sol_fraction == pytest.approx(0.1 / 9.5)


def test_a_solution_at_another_precision_gets_no_speedup():
    tf32 = {**BASELINE_FLAGS, "cuda.matmul.allow_tf32": True}
    r = assemble(Facts(REQ, replace(DONE, solution_flags=tf32), timing=TIMED, work=Work(0.0, 6.7e9, 0.0)))
    assert r.valid and r.speedup is None and r.speedup_ci is None and r.sol_fraction is None
    assert "solution ran with cuda.matmul.allow_tf32=True" in r.timing_note
    ref = assemble(Facts(replace(REQ, backend_flags=tf32), DONE, timing=TIMED))
    assert ref.speedup is None and "reference ran with" in ref.timing_note
