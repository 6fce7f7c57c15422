"""The source is read once, in the checker child (`drkernel.gym.orchestrator.static_child`): the
verdict, the forged-report check and a CUDA solution's contract use the child's `StaticFacts`, so
nothing in the evaluation's own thread analyses the solution (where no deadline or cancel reaches).

The analysis is memoised per process (`drkernel.gym.verdict.static._analyze`): its cache's misses in
this process count the analyses that ran here."""

from __future__ import annotations

import contextlib
from pathlib import Path

from gym_cases import RELU_SOLUTION, request

from drkernel.gym import EvalConfig, EvalRequest, Status
from drkernel.gym.cuda.contract import check_cuda
from drkernel.gym.cuda.evaluate import report_of, static_status, with_languages
from drkernel.gym.orchestrator.static_child import StaticChecks, StaticFacts, read_source
from drkernel.gym.verdict import static
from drkernel.gym.verdict.checks import source_view, static_tf32
from drkernel.problems import Problem

ROOT = Path(__file__).resolve().parents[2]
CUDA_GOLD = (ROOT / "src/drkernel/problems/builtin_cuda/level1/gelu/gold.py").read_text()
HOSTILE_LINE = "_x = _a" + ".b" * 100 + "\n"


def _hostile(head: str) -> str:
    """``head`` and then attribute chains up to the service's 256 KiB: about 10 s of analysis on an idle
    core, 38 s measured on this 2-core host under load (every link of every chain is resolved)."""
    return head + HOSTILE_LINE * ((256 * 1024 - len(head) - 100) // len(HOSTILE_LINE))


def _analyses_here() -> int:
    return static._analyze.cache_info().misses


def test_the_facts_are_the_in_process_reading_and_survive_the_header():
    source = ("import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x):\n"
              "    a = tl.dot(x, x)\n\ndef helper():\n    pass\n\nclass ModelNew(torch.nn.Module):\n"
              "    def forward(self, x):\n        return torch.relu(x)\n")
    facts = read_source((), source, None, "triton", run_checks=False)
    report, own, language = source_view(source)
    assert (facts.own_kernels, facts.torch_calls, facts.language) == (own, report.torch_calls, language)
    assert facts.own_kernels == ("k",) and facts.torch_calls  # torch.relu reachable from forward
    assert facts.tf32 == tuple(static_tf32(source)) and facts.tf32
    assert facts.functions == {"k", "helper", "forward"}
    assert StaticFacts.from_header(facts.to_header()) == facts


def test_a_cuda_contract_read_in_the_child_is_the_contract_read_in_process():
    checks = StaticChecks(())
    try:
        facts = checks.run(CUDA_GOLD, None, 60, contextlib.nullcontext, "cuda", False)
    finally:
        checks.close()
    report = check_cuda(CUDA_GOLD)
    assert facts.language == "CUDA" and facts.modules == tuple(report.modules)
    assert report_of(facts).own_kernels == report.own_kernels
    assert static_status(report_of(facts)) is None is static_status(report)


def test_a_hostile_cuda_source_is_read_only_in_the_child_and_stops_at_timeout_s(evaluator):
    """A CUDA solution with 256 KiB of ``a.b.b...`` chains under ``timeout_s=1``: its contract is read in
    the checker child, killed at the deadline, so the evaluation (and its worker slot) ends after
    ``timeout_s`` plus a kill (the error names the deadline, which only the child's wait raises);
    this process analyses nothing (its contract read here took 10-38 s, uncancellable)."""
    front = with_languages(evaluator, device="cpu")
    hostile = EvalRequest(problem=Problem(name="gelu", level=1, code="import torch\n", source="builtin"),
                          solution=_hostile(CUDA_GOLD), config=EvalConfig(device="cpu", timeout_s=1), language="cuda")
    before = _analyses_here()
    result = front.evaluate(hostile)
    assert result.status is Status.TIMEOUT
    assert "did not finish within timeout_s (1 s)" in (result.error or "")
    assert _analyses_here() == before


def test_a_whole_evaluation_analyses_nothing_in_this_process(evaluator):
    """A correct solution evaluated end to end (checks, candidate, verdict, forged-report check): valid,
    and not one analysis of its source in the evaluating process."""
    source = RELU_SOLUTION + "\n# read once\n"  # a source no earlier test had analysed here
    before = _analyses_here()
    result = evaluator.evaluate(request(source))
    assert result.valid, (result.status, result.error, result.hacks)
    assert _analyses_here() == before
