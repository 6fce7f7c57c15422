"""The verdict from reports: each run-time signal maps to its hack, lenient and strict differ only in
strict-only findings, coverage and the lazy warning are filled, missing integrity runs are hack 8."""

from __future__ import annotations

import textwrap

import pytest

from drkernel.gym import EvalConfig, EvalRequest, EvalResult, Status
from drkernel.gym.verdict.hacks import EXTRA_TAGS
from drkernel.gym.verdict.checks import BlockingStaticCheck, IntegrityVerdict, annotate
from drkernel.problems.problem import Problem

REF = {"aten::mm.default": [1, 3.0, 0, 0], "aten::relu.default": [1, 1.0, 0, 0]}
GOLD = textwrap.dedent('''
    import torch, torch.nn as nn, triton, triton.language as tl

    @triton.jit
    def k(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)

    class ModelNew(nn.Module):
        def forward(self, a, b):
            y = torch.empty_like(a)
            k[(1,)](a, y, a.numel(), B=64)
            return y
''')


def request(solution: str = GOLD, **config) -> EvalRequest:
    problem = Problem(name="mm_relu", level=1, code="", dtype="float32")
    return EvalRequest(problem, solution, EvalConfig(device="cpu", trials=2, **config))


def reports(passed: dict[str, bool] | None = None, sol_ops: dict | None = None, launches: int = 1,
            per_call: list[int] | None = None, trials: list[dict] | None = None) -> tuple[dict, dict]:
    verdicts = {"skip_own": False, "zeros_probe": False, "poisoned": True, "recall_same": True,
                "call_count_last": True, "sparse_perturb": True, "sparse_perturb_2": True, **(passed or {})}
    cand = {"integrity": {"hacks": [], "coverage_profile": sol_ops if sol_ops is not None else {},
                          "coverage_own_launches": launches, "own_launches": launches * 9,
                          "call_count_launches": per_call or [launches] * 6},
            "launches": {"kernels": [{"name": "k", "own": True, "launches": launches, "total_launches": launches * 9}]}}
    judge = {"trials": trials or [{"trial": 0, "passed": True}, {"trial": 1, "passed": True}],
             "extra": {t: {"passed": v} for t, v in verdicts.items()}, "op_profile": REF}
    return cand, judge


def codes(hacks, strict_only=False):
    return sorted({h.code for h in hacks if h.strict_only == strict_only})


def test_gold_run_has_no_hack():
    cand, judge = reports()
    assert IntegrityVerdict().check(request(), cand, judge) == []


@pytest.mark.parametrize("passed, code", [
    ({"skip_own": True}, 2), ({"poisoned": False}, 5), ({"recall_same": False}, 9), ({"call_count_last": False}, 10),
    ({"sparse_perturb": False}, 9), ({"sparse_perturb_2": False}, 9),
])
def test_each_integrity_run_maps_to_its_hack(passed, code):
    cand, judge = reports(passed)
    assert codes(IntegrityVerdict().check(request(), cand, judge)) == [code]


def test_skip_run_on_a_degenerate_reference_is_inconclusive():
    cand, judge = reports({"skip_own": True, "zeros_probe": True})
    assert IntegrityVerdict().check(request(), cand, judge) == []


def test_decoy_and_pure_pytorch():
    cand, judge = reports(launches=0)
    cand["launches"]["kernels"] = []
    cand["integrity"]["own_launches"] = 0
    assert 1 in codes(IntegrityVerdict().check(request(), cand, judge))
    no_kernel = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, a, b):\n        return a\n"
    assert 2 in codes(IntegrityVerdict().check(request(no_kernel), cand, judge))


def test_a_candidate_that_reported_nothing_is_no_decoy():
    """Trials passed, then the candidate timed out before its report: no launch count is known, so
    nothing says forward launched none of its kernels."""
    cand, judge = reports()
    assert 1 not in codes(IntegrityVerdict().check(request(), {}, judge))
    cand["launches"]["kernels"], cand["integrity"] = [], {"hacks": []}
    assert 1 not in codes(IntegrityVerdict().check(request(), cand, judge))


def test_launches_dropping_on_repeated_calls_is_hack_10():
    cand, judge = reports(per_call=[1, 1, 0, 0])
    assert codes(IntegrityVerdict().check(request(), cand, judge)) == [10]


@pytest.mark.parametrize("event_ms, wall_ms, hidden", [(0.2, 0.35, False), (0.2, 0.45, True), (2.0, 3.05, False),
                                                       (2.0, 3.2, True)])
def test_events_against_wall_time_is_judged_by_the_verdict(event_ms, wall_ms, hidden):
    """The candidate only reports the integrity hook's two numbers; the verdict decides hack 7."""
    cand, judge = reports()
    cand["integrity"]["gpu"] = {"kernels": [], "event_ms": event_ms, "wall_ms": wall_ms, "out_bytes": 4}
    hacks = IntegrityVerdict().check(request(), cand, judge)
    assert codes(hacks) == ([7] if hidden else [])
    if hidden:
        assert f"{wall_ms:.3f} ms" in hacks[0].evidence and f"{event_ms:.3f} ms" in hacks[0].evidence


@pytest.mark.parametrize("gpu", [{"event_ms": "x", "wall_ms": 9.0}, {"event_ms": float("nan"), "wall_ms": 9.0},
                                 {"wall_ms": 9.0}, "not a dict"])
def test_an_unreadable_events_report_judges_nothing(gpu):
    cand, judge = reports()
    cand["integrity"]["gpu"] = gpu
    assert IntegrityVerdict().check(request(), cand, judge) == []


def test_second_size_failure_is_hack_13():
    cand, judge = reports(trials=[{"trial": 0, "passed": True}, {"trial": 1, "passed": True},
                                  {"trial": 2, "passed": False, "message": "values differ"}])
    assert codes(IntegrityVerdict().check(request(), cand, judge)) == [13]


def test_coverage_floor_in_lenient_and_op_allowlist_in_strict():
    cand, judge = reports(sol_ops={"aten::mm.default": [1, 3.0, 0, 0], "aten::relu.default": [1, 0.7, 0, 0]})
    hacks = IntegrityVerdict().check(request(), cand, judge)  # coverage 0.075 < 0.1
    assert codes(hacks) == [2] and codes(hacks, strict_only=True) == [2]
    cand, judge = reports(sol_ops={"aten::mm.default": [1, 3.0, 0, 0]})  # coverage 0.25: lazy, valid
    hacks = IntegrityVerdict().check(request(), cand, judge)
    assert codes(hacks) == [] and codes(hacks, strict_only=True) == [2]
    assert IntegrityVerdict().check(request(strict_allowlist=("aten::mm.default",)), cand, judge) == []


def test_annotate_fills_coverage_and_lazy_warning_and_both_verdicts():
    cand, judge = reports(sol_ops={"aten::mm.default": [1, 3.0, 0, 0]})
    req = request()
    result = EvalResult(status=Status.CORRECT)
    result.hacks = IntegrityVerdict().check(req, cand, judge)
    annotate(result, req, cand, judge)
    result.finalize()
    assert result.op_coverage == pytest.approx(0.25)
    assert result.warnings and result.warnings[0].startswith("lazy_optimization: only 25%")
    assert result.valid and result.valid_lenient and not result.valid_strict
    strict = EvalResult(status=Status.CORRECT, verdict_mode="strict", hacks=list(result.hacks)).finalize()
    assert not strict.valid


@pytest.mark.parametrize("tag", ["poisoned", "sparse_perturb_2"])
def test_missing_integrity_runs_of_a_correct_solution_are_hack_8(tag):
    cand, judge = reports()
    del judge["extra"][tag]
    result = EvalResult(status=Status.CORRECT)
    annotate(result, request(), cand, judge)
    assert [h.code for h in result.hacks] == [8] and tag in result.hacks[0].evidence
    failed = EvalResult(status=Status.INCORRECT)
    annotate(failed, request(), cand, judge)
    assert failed.hacks == []


def test_integrity_runs_ended_by_an_exception_are_hack_8():
    """Every run reached the judge, but the hook's runs ended on the solution's exception afterwards
    (e.g. raised in the first unobserved call, the GPU pass whose measurements then go missing)."""
    cand, judge = reports()
    cand["integrity"]["extra_runs"] = {"error": "RuntimeError: transient launch failure"}
    result = EvalResult(status=Status.CORRECT)
    annotate(result, request(), cand, judge)
    assert [h.code for h in result.hacks] == [8] and "transient launch failure" in result.hacks[0].evidence
    cand["integrity"]["extra_runs"] = {"runs": {}, "calls": 9, "order": []}  # ended normally
    clean = EvalResult(status=Status.CORRECT)
    annotate(clean, request(), cand, judge)
    assert clean.hacks == []


def test_tf32_dot_is_hack_12_only_under_kernelbench():
    tf32 = GOLD.replace("tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)",
                        "tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)\n    tl.dot(x, x)")
    cand, judge = reports()
    assert codes(IntegrityVerdict().check(request(tf32, tolerance="kernelbench"), cand, judge)) == [12]
    assert codes(IntegrityVerdict().check(request(tf32), cand, judge)) == []
    exact = tf32.replace("tl.dot(x, x)", "tl.dot(x, x, input_precision='ieee')")
    assert codes(IntegrityVerdict().check(request(exact, tolerance="kernelbench"), cand, judge)) == []


def test_blocking_static_check_ignores_strict_only_findings():
    lazy = GOLD.replace("return y", "return y @ b")
    assert BlockingStaticCheck().check(lazy, None) == []
    assert [h.code for h in BlockingStaticCheck().check("import ctypes\n" + GOLD, None)] == [14]


def test_extra_tags_are_the_ones_the_hook_sends():
    assert EXTRA_TAGS == ("skip_own", "zeros_probe", "poisoned", "recall_same", "call_count_last",
                          "sparse_perturb", "sparse_perturb_2")


def test_host_scalar_reads_and_device_to_host_copies_beyond_a_few_are_hack_14():
    from drkernel.gym.verdict.coverage import HOST_COPY
    from drkernel.gym.verdict.checks import HOST_SCALARS_PER_CALL, host_scalars

    few = {"aten::_local_scalar_dense.default": [HOST_SCALARS_PER_CALL, 0.0, 0.0, 0.0]}
    many = {"aten::_local_scalar_dense.default": [64, 0.0, 0.0, 0.0]}
    copied = {HOST_COPY: [1, 0.0, 0.0, 4096.0]}
    assert host_scalars({"coverage_profile": few}) == []
    assert [h.code for h in host_scalars({"coverage_profile": many})] == [14]
    assert [h.code for h in host_scalars({"coverage_profile": copied})] == [14]
    assert host_scalars({}) == []


def test_own_launches_missing_from_the_timed_region_are_a_passthrough():
    """A solution that falls back to PyTorch only in the (unobserved) timed calls launches fewer own
    kernels there than the observed calls say it must."""
    from types import SimpleNamespace

    from drkernel.gym.result import EvalResult, Status
    from drkernel.gym.verdict.checks import timed_launches

    result = EvalResult(status=Status.CORRECT)
    config = SimpleNamespace(warmup_calls=10)
    judge = {"sol_timing": {"n": 100, "median_ms": 0.1}, "timing_plan": {"extra_warmup": 3}}

    def report(timed_launches_seen):
        return {"integrity": {"own_launches_before_timing": 50, "own_launches": 50 + timed_launches_seen,
                              "call_count_launches": [2, 2, 2]}}

    assert timed_launches(result, config, report(2 * 113), judge) == []
    assert [h.code for h in timed_launches(result, config, report(2 * 113 - 1), judge)] == [2]
    assert timed_launches(result, config, report(0), {}) == []  # CPU: nothing was timed
    assert timed_launches(EvalResult(status=Status.INCORRECT), config, report(0), judge) == []


def test_half_precision_tiles_are_named_for_the_kernelbench_profile():
    """Mechanism 11: fp16 tiles before tl.dot in an fp32 problem (even with input_precision="ieee")."""
    from drkernel.gym.verdict.checks import static_tf32

    src = "acc += tl.dot(a.to(tl.float16), b.to(tl.float16), input_precision='ieee')\n"
    found = static_tf32(src)
    assert len(found) == 2 and all("float16" in f for f in found)
    assert static_tf32("acc += tl.dot(a, b, input_precision='ieee')\ny = acc.to(tl.float32)\n") == []
