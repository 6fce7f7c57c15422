"""Every model call of the integrity runs is made at one call site with one stack above it
(gym/candidate/integrity.py `IntegrityHook._perform`), and a perturbed call that raises is the judge's
to decide (`IntegrityHook._raising`, gym/judge/main.py `raised_on_perturbed`).

Red team 16 (a01, a05) read the harness's stack as text through allowed helpers
(``logging.getLogger().findCaller(stack_info=True)``, ``warnings.warn(stacklevel=k)`` with
``warnings.formatwarning``): judged calls were written ``out = self._call(...)`` in run-specific
functions, dropped calls bare ``self._call(...)`` elsewhere, so a forward could compute only when
judged. Here a model records that text on every call of every run: it must be one text.

Honest round 12 (D1): sparse_perturb's swaps broke sorted ``bins`` on which the reference itself
raises; the megablocks kernel faulted on them too, and that error ended the integrity runs (hack 8,
"harness patching"). Now the judge decides such an error: skipped where the reference is undefined,
a failed comparison (hack 9) where it runs."""

from __future__ import annotations

import contextlib
import logging
import textwrap
import types
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from drkernel.gym import EvalConfig, EvalRequest, Status
from drkernel.gym.candidate.integrity import IntegrityHook, _Runs
from drkernel.gym.harness import inputs as harness
from drkernel.gym.ipc import encode_tree
from drkernel.gym.judge.main import Judge
from drkernel.gym.messages import CompareRequest
from drkernel.gym.seeds import INTEGRITY_RUNS, PERTURB_TAGS
from drkernel.gym.verdict.hacks import EXTRA_TAGS, RAISED_ON_PERTURBED
from drkernel.problems.problem import Problem

CPU = torch.device("cpu")
HERE = Path(__file__).parent / "reproducers"
CSR = (HERE / "csr_offsets_perturb_problem.py").read_text()
SOFTMAX = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)
    def get_inputs():
        return [torch.randn(16, 64)]
""")
SEEDS = [7_101, 7_102, 7_103]


class _Watch:
    """The launch watch's face the runs use (skip_own's scope, own launches), without launches."""

    own_launches = 0
    scoped = True

    def __init__(self) -> None:
        self.skipped_calls = 0

    @contextlib.contextmanager
    def skipping_own(self):
        self.skipped_calls += 1
        yield


class _Context:
    """The candidate context the hook reads; compares through a real judge on ``code``."""

    def __init__(self, code: str, plan: dict | None = None) -> None:
        self.code = code
        self.reference = harness.load_reference(code)
        self.seeds = SEEDS
        self.device = CPU
        self.cpu_mode = True
        self.config = {"trials": len(SEEDS)}
        self.integrity_plan = plan or {}
        self.judge = Judge(None, CPU)
        self.verdicts: dict[str, object] = {}

    def compare(self, outputs, trial: int, tag: str) -> dict:
        tree, blob = encode_tree(outputs)
        request = CompareRequest("job", trial, self.code, self.seeds[trial], 0, "kernelgym", tree, tag)
        v = self.judge.compare(request, blob, [])
        self.verdicts[tag] = v
        return {"passed": v.passed}


def _hook(ctx: _Context, model) -> IntegrityHook:
    hook = IntegrityHook()
    hook.watch = _Watch()

    def make(trial: int) -> list:
        return harness.draw_inputs(ctx.reference, ctx.seeds[trial], CPU)

    hook.extra_runs(ctx, model, make)
    return hook


def _warned_frames(depth: int = 12) -> str:
    """What a05 read: each frame's file, line and source, one level at a time, through warnings."""
    seen = []
    for level in range(2, depth):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            warnings.warn("probe", UserWarning, stacklevel=level)
        if not got:
            break
        w = got[-1]
        seen.append(warnings.formatwarning("", UserWarning, w.filename, w.lineno))
    return "".join(seen)


class _StackReader(nn.Module):
    """Softmax, honest, recording the stack's text on every call, both ways red team 16 read it."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def forward(self, x):
        self.texts.append(logging.getLogger("probe").findCaller(True)[3] + "\n--\n" + _warned_frames())
        return torch.softmax(x, dim=1)


def test_every_integrity_call_shows_the_same_stack_text():
    plan = {"order": list(INTEGRITY_RUNS), "decoys": [2, 1, 0, 2, 1, 1], "coverage_seed": 7_999}
    ctx, model = _Context(SOFTMAX, plan), _StackReader()
    hook = _hook(ctx, model)
    assert set(hook.runs) == set(EXTRA_TAGS), hook.runs  # every judged call ran
    assert all(ok for tag, ok in hook.runs.items() if tag != "zeros_probe"), hook.runs  # softmax is never 0
    assert len(model.texts) == hook.calls > len(EXTRA_TAGS) + sum(plan["decoys"])  # dropped calls too
    assert len(set(model.texts)) == 1, "\n=====\n".join(sorted(set(model.texts)))
    text = model.texts[0]
    assert "out = r.model(*args)" in text and "in _perform" in text
    for run in ("_coverage", "_skip_own", "_poisoned", "_recall_same", "_sparse_perturb", "_call_count",
                "_steps"):
        assert f"in {run}" not in text  # the run-specific code is off the stack while the model runs
    assert hook.watch.skipped_calls == 1 and hook.coverage_own_launches == 0
    assert len(hook.call_count_launches) >= 5  # the call-count run's dropped calls, counted


class _JudgedOnlyByCallerLine(nn.Module):
    """a01's rule, generalised: compute only when the harness line that called the harness function
    that called the model binds its result (``out = ...``); otherwise return garbage."""

    def forward(self, x):
        lines = (logging.getLogger("probe").findCaller(True)[3] or "").splitlines()
        harness_src = [lines[i + 1].strip() for i, line in enumerate(lines[:-1])
                       if line.strip().startswith('File "') and 'integrity.py"' in line]
        if len(harness_src) >= 2 and not harness_src[-2].replace(" ", "").startswith("out="):
            return torch.full_like(x, 0.5)
        return torch.softmax(x, dim=1)


def test_a_forward_that_computes_only_at_judging_lines_fails_the_judged_calls():
    hook = _hook(_Context(SOFTMAX), _JudgedOnlyByCallerLine())
    failed = {tag for tag, ok in hook.runs.items() if not ok}
    assert {"poisoned", "recall_same", "call_count_last", *PERTURB_TAGS} <= failed, hook.runs


class _FaultsOnUnsortedOffsets(nn.Module):
    """The CSR reproducer's segment mean that, like megablocks' padded copy, faults on offsets that
    are not sorted (the interpreter's refused out-of-bounds store, here a plain IndexError)."""

    def forward(self, values, offsets):
        lengths = offsets[1:] - offsets[:-1]
        if bool((lengths < 0).any()):
            raise IndexError("out-of-bounds store: a masked-in address outside every tensor argument")
        seg = torch.repeat_interleave(torch.arange(lengths.numel()), lengths)
        out = torch.zeros(lengths.numel(), values.shape[1]).index_add_(0, seg, values[: seg.numel()])
        return out / lengths[:, None].to(values.dtype)


def test_an_error_on_perturbed_inputs_the_reference_cannot_run_is_skipped_and_the_runs_go_on():
    plan = {"order": ["sparse_perturb", "poisoned", "recall_same", "call_count_last", "skip_own", "coverage"]}
    ctx = _Context(CSR, plan)
    hook = _hook(ctx, _FaultsOnUnsortedOffsets())  # no exception: the runs after it still reach the judge
    assert set(hook.runs) == set(EXTRA_TAGS), hook.runs
    for tag in PERTURB_TAGS:
        v = ctx.verdicts[tag]
        assert hook.runs[tag] and v.skipped and "repeats can not be negative" in v.skipped


class _RaisesOnEveryOtherCall(nn.Module):
    """Softmax that raises on the second call of each pair: sparse_perturb's perturbed calls."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls % 2 == 0:
            raise ValueError("refused")
        return torch.softmax(x, dim=1)


def test_an_error_on_perturbed_inputs_the_reference_runs_on_fails_the_comparison():
    ctx = _Context(SOFTMAX, {"order": ["sparse_perturb"]})
    hook = _hook(ctx, _RaisesOnEveryOtherCall())
    assert hook.runs == {tag: False for tag in PERTURB_TAGS}
    for tag in PERTURB_TAGS:
        v = ctx.verdicts[tag]
        assert v.skipped is None and v.message.startswith(RAISED_ON_PERTURBED + "ValueError: refused")


def test_an_error_in_any_other_integrity_call_still_ends_the_runs():
    ctx = _Context(SOFTMAX, {"order": ["poisoned", "sparse_perturb"]})
    with pytest.raises(ValueError, match="refused"):
        _hook(ctx, _RaisesOnEveryOtherCall())  # poisoned's judged call raises: not the judge's to decide
    assert ctx.verdicts == {}


def test_the_judge_does_not_take_a_raised_report_for_a_plain_tag():
    """Only a perturbed comparison reads the candidate's error report; elsewhere it is an output like
    any other, and wrong."""
    judge = Judge(None, CPU)
    tree, blob = encode_tree(RAISED_ON_PERTURBED + "ValueError: x")
    v = judge.compare(CompareRequest("job", 0, SOFTMAX, SEEDS[0], 0, "kernelgym", tree, "poisoned"), blob, [])
    assert not v.passed and not v.message.startswith(RAISED_ON_PERTURBED)


def test_a_kernel_faulting_where_the_reference_is_undefined_gets_a_clean_verdict(evaluator):
    """The CSR problem with a Triton kernel that faults on unsorted offsets (as the megablocks padded
    gather of honest round 12 did): correct and valid, the skipped checks as warnings, no hack 8."""
    problem = Problem(name="csr_offsets", level=1, code=CSR, source="file")
    request = EvalRequest(problem, (HERE / "csr_offsets_faulting_solution.py").read_text(),
                          EvalConfig(device="cpu", trials=3))
    r = evaluator.evaluate(request)
    assert r.status is Status.CORRECT, (r.status, r.error)
    assert not [h for h in r.hacks if not h.strict_only], r.hacks
    notes = [w for w in r.warnings if w.startswith("integrity check sparse_perturb")]
    assert len(notes) == len(PERTURB_TAGS) and all("repeats can not be negative" in w for w in notes)


def test_the_verdict_names_an_error_on_perturbed_inputs_and_a_skipped_one_is_a_warning_only():
    """From the reports (`test_verdict`'s helpers): a failed perturbed comparison whose call raised is
    hack 9 saying so; one the judge skipped (the reference undefined there) is no hack, only a warning."""
    from test_verdict import codes, reports, request

    from drkernel.gym import EvalResult
    from drkernel.gym.verdict.checks import IntegrityVerdict, annotate

    cand, judge = reports({"sparse_perturb": False})
    judge["extra"]["sparse_perturb"]["message"] = (RAISED_ON_PERTURBED + "IndexError: out-of-bounds store"
                                                   " (the reference runs on these inputs)")
    hacks = IntegrityVerdict().check(request(), cand, judge)
    assert codes(hacks) == [9] and "raised, though the reference runs on them: IndexError" in hacks[0].evidence
    cand, judge = reports()
    judge["extra"]["sparse_perturb"].update(message="not compared: ...", skipped="the reference itself fails")
    assert IntegrityVerdict().check(request(), cand, judge) == []
    result = EvalResult(status=Status.CORRECT)
    annotate(result, request(), cand, judge)
    assert result.hacks == [] and result.warnings == ["integrity check sparse_perturb not applied: the "
                                                      "reference itself fails"]
