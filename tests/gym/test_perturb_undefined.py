"""A ``sparse_perturb`` comparison whose reference itself fails on the perturbed inputs
(gym/judge/main.py `Judge.perturbation_undefined`): the check does not apply to the problem, so it is
skipped with its reason recorded (`Verdict.skipped`, a warning on the result), never a JudgeError,
and the solution is not judged by it. A reference that fails unperturbed too, or runs out of memory,
is still the judge's failure. Problem and solution: ``reproducers/csr_offsets_*`` (sorted CSR offsets,
whose swapped values make a segment length negative)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from drkernel.gym import EvalConfig, EvalRequest, Status
from drkernel.gym.harness import inputs as harness
from drkernel.gym.ipc import encode_tree
from drkernel.gym.judge.main import Judge
from drkernel.gym.messages import CompareRequest, Verdict
from drkernel.gym.seeds import PERTURB_TAGS, perturbed
from drkernel.gym.verdict.checks import skipped_checks
from drkernel.problems.problem import Problem

HERE = Path(__file__).parent / "reproducers"
CSR = (HERE / "csr_offsets_perturb_problem.py").read_text()
CPU = torch.device("cpu")
SEED = 9_101


def _compare(judge: Judge, code: str, value, tag: str | None, post: list | None = None) -> Verdict:
    tree, blob = encode_tree(value if tag else (value, post))
    return judge.compare(CompareRequest("job", 0, code, SEED, 0, "kernelgym", tree, tag), blob, [])


def test_the_csr_reference_fails_on_the_perturbed_inputs_and_runs_on_the_plain_ones():
    ref = harness.load_reference(CSR)
    model = ref.Model()
    model(*harness.draw_inputs(ref, SEED, CPU))
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        model(*harness.draw_inputs(ref, perturbed(SEED, 1), CPU))


@pytest.mark.parametrize("tag", PERTURB_TAGS)
def test_the_judge_skips_a_perturbed_comparison_the_reference_cannot_run_with_its_reason(tag):
    v = _compare(Judge(None, CPU), CSR, torch.zeros(8, 64), tag)  # any answer: nothing is compared
    assert v.passed and v.skipped and "repeats can not be negative" in v.skipped
    assert v.message.startswith("not compared")
    assert Verdict.from_header(v.to_header()).skipped == v.skipped  # it crosses the process boundary


def test_a_plain_trial_of_the_same_problem_is_still_compared():
    judge, ref = Judge(None, CPU), harness.load_reference(CSR)
    args = harness.draw_inputs(ref, SEED, CPU)
    right = ref.Model()(*args)
    assert _compare(judge, CSR, right, None, args).passed
    wrong = _compare(judge, CSR, right + 1, None, args)
    assert not wrong.passed and wrong.skipped is None


BROKEN = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            raise ValueError("this reference never runs")
    def get_inputs():
        return [torch.randn(16, 64)]
""")
OOM_WHEN_PERTURBED = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x, offsets):
            if bool((offsets[1:] < offsets[:-1]).any()):  # what memory pressure looks like to the judge
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            return x * 2
    def get_inputs():
        return [torch.randn(16, 64), torch.arange(1, 65) * 3]
""")


@pytest.mark.parametrize("code, match", [(BROKEN, "never runs"), (OOM_WHEN_PERTURBED, "out of memory")])
def test_a_reference_that_fails_unperturbed_or_runs_out_of_memory_is_still_the_judges_failure(code, match):
    with pytest.raises(Exception, match=match):
        _compare(Judge(None, CPU), code, torch.zeros(16, 64), PERTURB_TAGS[0])


def test_skipped_comparisons_become_warnings_and_others_do_not():
    report = {"extra": {"poisoned": {"passed": True}, "sparse_perturb": {"passed": True, "skipped": "why"}}}
    assert skipped_checks(report) == ["integrity check sparse_perturb not applied: why"]


def test_the_csr_reproducer_gets_a_verdict_with_the_skip_recorded(evaluator):
    problem = Problem(name="csr_offsets", level=1, code=CSR, source="file")
    request = EvalRequest(problem, (HERE / "csr_offsets_solution.py").read_text(),
                          EvalConfig(device="cpu", trials=3))
    r = evaluator.evaluate(request)
    assert r.status is Status.CORRECT, (r.status, r.error)
    notes = [w for w in r.warnings if w.startswith("integrity check sparse_perturb")]
    assert len(notes) == len(PERTURB_TAGS) and all("repeats can not be negative" in w for w in notes)
    assert not [h for h in r.hacks if not h.strict_only], r.hacks  # neither hack 9 nor a "never reached" 8
