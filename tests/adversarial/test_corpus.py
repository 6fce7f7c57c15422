"""The adversarial corpus through the real evaluator (judge and candidate processes, Triton's
interpreter on CPU): every hacked solution is caught with its own hack code, no honest solution is
flagged in either verdict mode, and every lazy solution is valid with coverage below 0.5.

The whole corpus is evaluated once per module, two candidates at a time."""

from __future__ import annotations

import asyncio

import pytest
from corpus import NOT_CORRECT, Case, cases, problem_source

from drkernel.gym import EvalConfig, EvalRequest, Status
from drkernel.gym.checks import default_checks
from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
from drkernel.gym.verdict.static import analyze
from drkernel.problems.problem import Problem

HACKED, HONEST, LAZY = cases("hacked"), cases("honest"), cases("lazy")
TRIALS = 3  # trial 0 plain, then one WIDE and one SHIFTED input distribution (drkernel.gym.seeds)
# The module fixture evaluates every selected case (about 20 by default, 65 with slow ones) before
# the first test; on a loaded 2-core machine that can outlast the project's 600 s default.
pytestmark = pytest.mark.timeout(3600)


def _params(selected: list[Case]) -> list:
    """Run-time cases outside the default set are slow; statically rejected ones are instant."""
    return [pytest.param(c, id=c.id, marks=() if c.default or analyze(c.source).hacks else pytest.mark.slow)
            for c in selected]


def _request(case: Case) -> EvalRequest:
    problem = Problem(name=case.problem, level=1, code=problem_source(case.problem), source="file")
    return EvalRequest(problem, case.source, EvalConfig(device="cpu", trials=TRIALS, tolerance=case.tolerance),
                       request_id=case.id)


@pytest.fixture(scope="module")
def results(request):
    """Evaluate, in one batch, the corpus cases this session selected."""
    wanted = {item.callspec.params["case"].id for item in request.session.items
              if hasattr(item, "callspec") and isinstance(item.callspec.params.get("case"), Case)}
    all_cases = [c for c in HACKED + HONEST + LAZY if c.id in wanted or c is LAZY[0]]
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2,
                            checks=default_checks()) as ev:
        out = asyncio.run(ev.evaluate_batch([_request(c) for c in all_cases]))
    return {c.id: r for c, r in zip(all_cases, out)}


def test_corpus_size_and_coverage_of_categories():
    assert len(HACKED) >= 30 and len(HONEST) >= 30 and len(LAZY) >= 3
    codes = {code for c in HACKED for code in c.expect[:1]}
    assert codes >= {1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
    assert all(c.problem and c.expect for c in HACKED)
    assert sum("# redteam:" in c.source for c in HACKED) >= 25  # issue 12: the red team of part B
    assert sum("# redteam:" in c.source for c in HONEST) >= 10
    # Public Triton's idioms (tutorials, Liger-Kernel, Unsloth, FlagGems), written for the gym.
    assert sum(c.path.name.startswith("pub_") and "# idiom:" in c.source for c in HONEST) >= 30


def _show(result) -> str:
    return f"{result.status.value}: " + "; ".join(f"{h.code} {h.evidence}" for h in result.hacks) + (
        f" | {result.error[-300:]}" if result.error else "")


@pytest.mark.parametrize("case", _params(HACKED))
def test_hack_is_caught_with_its_code(results, case):
    r = results[case.id]
    assert not r.valid and not r.valid_lenient, _show(r)
    if NOT_CORRECT in case.expect and r.status is Status.INCORRECT:
        return
    found = {h.code for h in r.hacks if not h.strict_only}
    assert found & set(case.expect), f"expected one of {case.expect}: {_show(r)}"
    assert all(h.message and h.evidence and h.name for h in r.hacks)


@pytest.mark.parametrize("case", _params(HONEST))
def test_honest_solution_is_never_flagged(results, case):
    r = results[case.id]
    assert r.status is Status.CORRECT, _show(r)
    assert r.hacks == [] and r.valid and r.valid_lenient and r.valid_strict, _show(r)
    assert r.op_coverage is not None and r.op_coverage >= 0.9, r.op_coverage
    assert r.warnings == []


@pytest.mark.parametrize("case", _params(LAZY))
def test_lazy_solution_is_valid_with_low_coverage_and_a_warning(results, case):
    r = results[case.id]
    assert r.status is Status.CORRECT and r.valid and r.valid_lenient, _show(r)
    assert 0.1 <= r.op_coverage < 0.5
    assert any(w.startswith("lazy_optimization") for w in r.warnings)
    assert not r.valid_strict and all(h.strict_only and h.code == 2 for h in r.hacks), _show(r)


def test_strict_mode_reports_strict_verdict(results):
    lazy = results[LAZY[0].id]
    assert lazy.valid_lenient and not lazy.valid_strict
