"""The timed region's verdicts: plausibility bounds, the re-measurement, sampled timed outputs."""

import math

import pytest

from drkernel.gym.verdict.plausibility import (PROFILED_KERNELS_RATIO, PROFILED_RATIO, PROFILED_SLACK_MS,
                                               WALL_RATIO, WALL_SLACK_MS, floor_ms, impossible, missed_work,
                                               profiled_apart, suspicious, tree_bytes)
from drkernel.gym.result import EvalResult, Status
from drkernel.gym.verdict.checks import timing_hacks

H100 = "NVIDIA H100 80GB HBM3"
GB = 1 << 30


def test_tree_bytes_counts_every_tensor_leaf():
    tree = {"k": "tuple", "items": [{"k": "tensor", "dtype": "float32", "shape": [4, 8]},
                                    {"k": "list", "items": [{"k": "tensor", "dtype": "bfloat16", "shape": [3]},
                                                            {"k": "scalar", "value": 1.0}]}]}
    assert tree_bytes(tree) == 4 * 8 * 4 + 3 * 2
    assert tree_bytes(None) == 0 and tree_bytes({"k": "scalar", "value": 2}) == 0


def test_floor_uses_the_device_family_bandwidth():
    assert abs(floor_ms(GB, H100) - GB / 3.35e12 * 1e3) < 1e-12
    assert floor_ms(GB, "NVIDIA H200") < floor_ms(GB, H100)
    assert floor_ms(GB, "some future GPU") == floor_ms(GB, "NVIDIA H200")  # the most generous


def test_bounds():
    floor = floor_ms(GB, H100)  # about 0.32 ms
    assert impossible(0.4 * floor, GB, H100) and not impossible(0.6 * floor, GB, H100)
    assert not impossible(0.0, 0, H100)  # no tensor outputs: no floor
    assert suspicious(0.4 * floor, GB, H100, None)
    assert suspicious(0.05, 0, H100, roofline_ms=1.0) and not suspicious(0.2, 0, H100, roofline_ms=1.0)
    assert not missed_work(0.1, 0.2) and missed_work(0.1, 0.3)


@pytest.mark.parametrize("event_ms", [0.0, 0.004, 0.2, 3.0, 250.0])
def test_missed_work_is_one_bound_strict_above_it(event_ms):
    """The one events-vs-wall bound: at it is not a hack, the next float above it is."""
    bound = WALL_RATIO * event_ms + WALL_SLACK_MS
    assert not missed_work(event_ms, bound)
    assert missed_work(event_ms, math.nextafter(bound, math.inf))
    assert not missed_work(event_ms, 0.9 * bound)
    assert not missed_work(event_ms, event_ms)  # wall equal to the events: nothing hidden


def _report(median_ms, samples, sync=None, out_bytes=GB, keep=(7, 99), n=100, profiled="same", span="same"):
    profiled_ms = 0.9 * median_ms if profiled == "same" else profiled
    span_ms = 1.2 * median_ms if span == "same" else span
    return {"sol_timing": {"median_ms": median_ms, "n": n, "profiled_ms": profiled_ms, "profiled_span_ms": span_ms},
            "timing_plan": {"keep": list(keep)}, "out_bytes": out_bytes,
            "sol_timing_sync": None if sync is None else {"median_ms": sync}, "roofline_ms": 1.0,
            "extra": {f"timed_call_{i}": {"passed": ok, "message": "" if ok else "3 of 9 values outside"}
                      for i, ok in samples.items()}}


def _codes(report, status=Status.CORRECT):
    return [h.code for h in timing_hacks(EvalResult(status=status, device_name=H100), report)]


def test_plausible_time_with_right_samples_is_clean():
    assert _codes(_report(1.0, {7: True, 99: True})) == []


def test_a_wrong_timed_output_is_hack_10():
    hacks = timing_hacks(EvalResult(status=Status.CORRECT, device_name=H100), _report(1.0, {7: True, 99: False}))
    assert [h.code for h in hacks] == [10] and "99" in hacks[0].evidence


def test_missing_samples_or_remeasurement_is_hack_8():
    assert _codes(_report(1.0, {99: True})) == []  # large outputs: only the last call is kept
    assert _codes(_report(1.0, {7: True})) == [8]
    assert _codes(_report(0.01, {7: True, 99: True})) == [8]  # suspicious, and no re-measurement came


def test_a_budget_cut_moves_the_last_sample_and_never_goes_below_the_minimum():
    # 10 of the planned 100 calls timed: the planned last (99) is call 9, the random 7 stays 7
    assert _codes(_report(1.0, {7: True, 9: True}, n=10)) == []
    assert _codes(_report(1.0, {7: True, 99: True}, n=10)) == [8]  # the new last never came
    assert _codes(_report(1.0, {7: True, 9: False}, n=10)) == [10]
    assert _codes(_report(1.0, {4: True, 8: True}, keep=(44, 99), n=9)) == [8]  # 9 < the minimum of 10
    assert _codes(_report(1.0, {7: True, 99: True}, n=None)) == [8]  # no count reported


def test_budgeted_calls_and_kept_calls():
    from drkernel.gym.harness.timing import budgeted_calls
    from drkernel.gym.seeds import kept_timed_calls

    assert budgeted_calls(100, 0.5, 1000.0, 10) == 100  # fits: unchanged
    assert budgeted_calls(100, 100.0, 1000.0, 10) == 10  # 100 ms calls: 10 of them
    assert budgeted_calls(100, 400.0, 1000.0, 10) == 10  # never below the minimum
    assert budgeted_calls(100, 25.0, 1000.0, 10) == 40
    assert budgeted_calls(5, 400.0, 1000.0, 10) == 5  # the minimum is at most the planned calls
    assert budgeted_calls(100, 100.0, 0.0, 10) == 100  # budget off
    assert kept_timed_calls({7, 99}, 100, 100) == {7, 99}
    assert kept_timed_calls({7, 99}, 100, 10) == {7, 9}
    assert kept_timed_calls({57, 99}, 100, 10) == {7, 9}
    assert kept_timed_calls({99}, 100, 12) == {11}
    for planned in (10, 37, 100):  # always in range, the planned last always maps to the new last
        for n in range(1, planned + 1):
            kept = kept_timed_calls({0, planned // 2, planned - 1}, planned, n)
            assert all(0 <= k < n for k in kept) and n - 1 in kept


def test_remeasurement_decides():
    fast = 0.01  # below 0.5 x the 1 GB floor (about 0.16 ms)
    assert _codes(_report(fast, {7: True, 99: True}, sync=fast)) == [7]  # impossible even synchronised
    assert _codes(_report(0.05, {7: True, 99: True}, sync=0.9, out_bytes=0)) == [7]  # events missed work
    assert _codes(_report(0.05, {7: True, 99: True}, sync=0.06, out_bytes=0)) == []  # confirmed


@pytest.mark.parametrize("timed_ms", [0.003, 0.05, 1.0, 40.0])
def test_profiled_apart_is_one_bound_each_way(timed_ms):
    """The profiled calls' kernels taking longer than the bound: the timed calls ran cheaper work; their
    span (launches included) shorter than the bound: the profiler saw less than was timed. At a bound is
    not apart, the next float beyond it is."""
    slower = PROFILED_KERNELS_RATIO * timed_ms + PROFILED_SLACK_MS
    assert profiled_apart(timed_ms, slower) is None
    assert profiled_apart(timed_ms, math.nextafter(slower, math.inf)) == "timed faster"
    shorter = (timed_ms - PROFILED_SLACK_MS) / PROFILED_RATIO
    if shorter > 0:
        assert profiled_apart(timed_ms, 0.9 * timed_ms, 1.01 * shorter) is None
        assert profiled_apart(timed_ms, 0.0, 0.99 * shorter) == "profiled faster"
    # honest: kernels below the median (no gaps, a warm L2), the span above it (traced launches)
    assert profiled_apart(timed_ms, 0.7 * timed_ms, 3.0 * timed_ms + 0.2) is None
    assert profiled_apart(timed_ms, 0.0) is None  # no span reported: only the first bound


def test_a_forward_that_runs_other_work_when_profiled_is_hack_7():
    """An honest Triton GEMM when profiled, a library GEMM three times faster when timed: hack 7 with
    both times in the evidence; a profiled time that never came is hack 8."""
    hacks = timing_hacks(EvalResult(status=Status.CORRECT, device_name=H100),
                         _report(1.0, {7: True, 99: True}, profiled=3.0, span=3.2))
    assert [h.code for h in hacks] == [7] and "3.0000" in hacks[0].evidence and "timed faster" in hacks[0].evidence
    # a near-empty forward when profiled: even its span with the launches is a third of the median
    assert _codes(_report(3.0, {7: True, 99: True}, profiled=0.01, span=1.0)) == [7]
    assert _codes(_report(1.0, {7: True, 99: True}, profiled=1.3, span=1.3)) == []
    assert _codes(_report(1.0, {7: True, 99: True}, profiled=None)) == [8]


def test_not_judged_unless_correct_and_timed():
    assert _codes(_report(0.01, {}), status=Status.INCORRECT) == []
    assert _codes({**_report(0.01, {}), "timing_plan": None}) == []


def test_timing_plan_always_samples_the_last_timed_call():
    from drkernel.gym.config import EvalConfig
    from drkernel.gym.orchestrator.evaluator import timing_plan

    cfg = EvalConfig(warmup_calls=10, timed_calls=100)
    plans = [timing_plan(cfg) for _ in range(50)]
    assert all(99 in p["keep"] and all(0 <= i < 100 for i in p["keep"]) for p in plans)
    assert all(0 <= p["extra_warmup"] <= 10 for p in plans)
    assert len({p["extra_warmup"] for p in plans}) > 1  # drawn, not fixed


def test_staging_layout_aligns_every_tensor():
    import torch

    from drkernel.gym.ipc import StagingBuffer

    tensors = [torch.empty(3, dtype=torch.float32), torch.empty(5, dtype=torch.float16), torch.empty(0)]
    offsets, total = StagingBuffer.layout(tensors)
    assert offsets == [0, 256, 512] and total == 512
    assert all(o % StagingBuffer.ALIGN == 0 for o in offsets)
