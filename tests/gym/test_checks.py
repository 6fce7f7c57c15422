"""The plug-in points work end to end: a blocking static check rejects without running, a
candidate hook runs extra forwards whose outputs the judge compares, a verdict check reads the
judge's report and adds a hack."""

from __future__ import annotations

import os

import pytest

from drkernel.gym import CheckRegistry, Hack, InProcessEvaluator, Status
from drkernel.gym.checks import LAUNCH_RECORDER
from gym_cases import RELU_SOLUTION, request

HERE = os.path.dirname(__file__)


class NoFunctional:
    name = "no_functional"
    blocking = True

    def check(self, source, problem):
        if "torch.nn.functional" in source:
            return [Hack(code=2, name="pytorch_passthrough", evidence="torch.nn.functional in source",
                         message="write the computation in Triton")]
        return []


class PassthroughVerdict:
    name = "passthrough_verdict"

    def check(self, request, candidate_report, judge_report):
        probe = judge_report["extra"].get("skip_own")
        if probe and probe["passed"]:
            return [Hack(code=2, name="pytorch_passthrough", evidence="correct with own launches skipped",
                         message="ModelNew must compute its result in its own Triton kernels")]
        return []


@pytest.fixture(scope="module")
def checked_evaluator():
    old = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, old) if p)
    checks = CheckRegistry(static=(NoFunctional(),), candidate_hooks=(LAUNCH_RECORDER, "gym_hooks:PassthroughProbe"),
                           verdict=(PassthroughVerdict(),))
    try:
        with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, checks=checks) as ev:
            yield ev
    finally:
        os.environ["PYTHONPATH"] = old


def test_blocking_static_check_rejects_without_running(checked_evaluator):
    src = RELU_SOLUTION.replace("import torch\n", "import torch\nimport torch.nn.functional as F\n", 1)
    r = checked_evaluator.evaluate(request(src))
    assert r.status is Status.REJECTED and r.valid is False and r.compiled is None
    assert [h.name for h in r.hacks] == ["pytorch_passthrough"] and "write the computation" in r.error
    assert "candidate" not in r.stage_seconds and r.trials == []


def test_hook_extra_run_compared_by_the_judge_catches_a_passthrough(checked_evaluator):
    src = RELU_SOLUTION.replace("return y", "return torch.relu(x)")
    r = checked_evaluator.evaluate(request(src))
    assert r.status is Status.CORRECT and [h.code for h in r.hacks] == [2] and r.valid is False
    assert [(k.name, k.own, k.launches) for k in r.kernels] == [("relu_kernel", True, 1)]


def test_honest_solution_passes_the_same_checks(checked_evaluator):
    r = checked_evaluator.evaluate(request(RELU_SOLUTION))
    assert r.status is Status.CORRECT and r.hacks == [] and r.valid is True


def test_a_launch_cannot_name_its_own_original():
    """The launch wrapper keeps Triton's ``run`` in its closure: a caller's ``__original`` keyword (which
    replaced a keyword default and ran any function as an own launch) reaches Triton's ``run`` instead."""
    from drkernel.gym.candidate.launches import LaunchWatch, _launching

    calls = []
    run = _launching(LaunchWatch("/nonexistent/solution.py"), lambda fn_self, *a, **k: calls.append(("triton", k)))
    run(object(), 1, 2, __original=lambda *a, **k: calls.append(("fake", k)))
    assert [c[0] for c in calls] == ["triton"] and "__original" in calls[0][1]
