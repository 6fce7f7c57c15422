"""The static checks run in a checker child (`drkernel.gym.orchestrator.static_child`), where the
request's ``timeout_s`` and a cancel reach them: the child is killed, the evaluation ends there, and a
child that answered serves the next evaluation."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from drkernel.errors import InfrastructureError
from drkernel.gym.checks import default_checks
from drkernel.gym.orchestrator.evaluator import Cancellation
from drkernel.gym.orchestrator.runtime import WaitCancelled
from drkernel.gym.orchestrator.static_child import StaticChecks, StaticTimeout
from drkernel.gym.verdict.checks import BlockingStaticCheck
from drkernel.problems.problem import Problem

PROBLEM = Problem(name="t", level=1, code="x")
HERE = str(Path(__file__).resolve().parent)


def _plain(part):
    return contextlib.nullcontext(part)


@pytest.fixture
def fixtures_importable(monkeypatch):
    """The checker child imports the tests' checks by module path."""
    import os

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))


def test_the_child_finds_what_the_checks_find_in_process_and_is_reused():
    source = "import os\nos.system('true')\nclass ModelNew:\n    pass\n"
    checks = StaticChecks(default_checks().static)
    try:
        facts = checks.run(source, PROBLEM, 60, _plain)
        assert (list(facts.hacks), facts.blocked) == (BlockingStaticCheck().check(source, PROBLEM), True)
        first = checks._idle[0].proc.pid
        facts = checks.run("class ModelNew:\n    pass\n", PROBLEM, 60, _plain)
        assert (facts.hacks, facts.blocked) == ((), False)
        assert [c.proc.pid for c in checks._idle] == [first]  # the same child served both
    finally:
        checks.close()


def test_past_timeout_s_the_child_is_killed_and_the_evaluation_times_out(fixtures_importable):
    from static_fixtures import NeverEnds

    checks = StaticChecks((NeverEnds(),))
    try:
        with pytest.raises(StaticTimeout, match="timeout_s"):
            checks.run("x = 1\n", PROBLEM, 0.5, _plain)
        assert checks._idle == []  # killed, not kept
    finally:
        checks.close()


def test_a_cancel_kills_the_child_and_ends_the_evaluation(fixtures_importable):
    from static_fixtures import NeverEnds

    checks = StaticChecks((NeverEnds(),))
    cancellation = Cancellation()
    cancellation.cancel()  # a part that joins a cancelled evaluation is cancelled at once
    try:
        with pytest.raises(WaitCancelled):
            checks.run("x = 1\n", PROBLEM, 600, cancellation.joined)
        assert checks._idle == []
    finally:
        checks.close()


def test_a_check_that_raises_is_our_failure_and_the_child_serves_on(fixtures_importable):
    from static_fixtures import Raises

    checks = StaticChecks((Raises(),))
    try:
        with pytest.raises(InfrastructureError, match="our check's own bug"):
            checks.run("x = 1\n", PROBLEM, 60, _plain)
        assert len(checks._idle) == 1
    finally:
        checks.close()


@pytest.mark.parametrize("source", ["x = " + "-" * 50_000 + "1\n", "f = " + "lambda: " * 3_000 + "1\n"])
def test_a_source_nested_past_the_parser_is_the_solutions_parse_error(source):
    """50,000 unary minus or 3,000 nested lambdas make CPython's parser raise MemoryError in the
    child: the solution's compile error (no ModelNew), not our failure, and the child serves on."""
    checks = StaticChecks(default_checks().static)
    try:
        facts = checks.run(source, PROBLEM, 60, _plain)
        assert "nests too deeply" in facts.parse_error and not facts.has_modelnew
        assert checks.run("class ModelNew:\n    pass\n", PROBLEM, 60, _plain).parse_error is None
    finally:
        checks.close()
