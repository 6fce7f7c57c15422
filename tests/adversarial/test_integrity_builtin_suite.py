"""The built-in suite's gold solutions (written independently of these checks) through the full
integrity checks: no gold solution is flagged, and every correct one covers at least 90% of its
reference's compute in its own kernels. A few run by default, all of them in test-slow."""

from __future__ import annotations

import asyncio

import pytest

from drkernel.gym import EvalConfig, EvalRequest, Status
from drkernel.gym.checks import default_checks
from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
from drkernel.problems import builtin_solution, load_builtin

PROBLEMS = {p.name: p for p in load_builtin()}
DEFAULT = ("gelu", "softmax", "matmul_square", "layernorm_gelu")
pytestmark = pytest.mark.timeout(3600)


@pytest.fixture(scope="module")
def gold_results(request):
    wanted = [item.callspec.params["name"] for item in request.session.items
              if hasattr(item, "callspec") and "name" in item.callspec.params
              and item.module.__name__ == __name__]
    reqs = [EvalRequest(PROBLEMS[n], builtin_solution(PROBLEMS[n], "gold.py"), EvalConfig(device="cpu", trials=2))
            for n in wanted]
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2,
                            checks=default_checks()) as ev:
        results = asyncio.run(ev.evaluate_batch(reqs))
    return dict(zip(wanted, results))


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow)
                                  for n in sorted(PROBLEMS)])
def test_gold_solution_is_clean_with_full_coverage(gold_results, name):
    r = gold_results[name]
    assert r.hacks == [] and r.warnings == [], [(h.code, h.evidence) for h in r.hacks] + r.warnings
    if r.status is Status.CORRECT:
        assert r.valid and r.valid_strict and r.op_coverage >= 0.9, r.op_coverage
