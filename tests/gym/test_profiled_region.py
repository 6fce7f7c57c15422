"""The timed region profiled: the verdict's reading of the profiled timed calls (kernels, streams,
their time against the timed median) and of how the observed calls' op coverage agrees with them."""

from types import SimpleNamespace

from drkernel.gym.config import EvalConfig
from drkernel.gym.result import EvalResult, Status
from drkernel.gym.verdict.checks import annotate, profiled_kernels, timed_launches
from drkernel.gym.verdict.coverage import COVERAGE_AGREEMENT, coverage_apart
from drkernel.gym.verdict.hacks import EXTRA_TAGS
from drkernel.gym.verdict.plausibility import PROFILED_CALLS

SOLUTION = """
import torch
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr):
    pass
"""
OWN = {"name": "mm_kernel", "own": True, "launches": 1, "device_time_ms": 1.0, "streams": [7]}
CUBLAS = {"name": "nvjet_sm90_tst_bf16", "own": False, "launches": 1, "device_time_ms": 0.3, "streams": [7]}


def _candidate(timed_kernels, gpu_kernels=(OWN,), off_stream=()):
    return {"integrity": {"gpu": {"kernels": list(gpu_kernels), "event_ms": 1.0, "wall_ms": 1.0},
                          "timed_profile": {"kernels": list(timed_kernels), "off_stream": list(off_stream)}}}


def _annotated(candidate, op_coverage=0.97):
    result = EvalResult(status=Status.CORRECT, device_name="NVIDIA H100 80GB HBM3", op_coverage=op_coverage)
    request = SimpleNamespace(config=EvalConfig(device="cuda"), solution=SOLUTION, language="triton")
    judge = {"sol_timing": {"median_ms": 1.0, "n": 100, "profiled_ms": 1.0}, "timing_plan": {"keep": [99]},
             "extra": {"timed_call_99": {"passed": True}, **{t: {"passed": True} for t in EXTRA_TAGS}}}
    annotate(result, request, candidate, judge)
    return result


def test_time_coverage_is_read_from_the_profiled_timed_calls():
    """The integrity hook's own profiler pass saw the honest kernel; the timed region's profile saw a
    library GEMM next to a marker launch: time coverage, and the hack, come from the timed region."""
    result = _annotated(_candidate([{**OWN, "device_time_ms": 0.001}, CUBLAS]))
    assert result.time_coverage is not None and result.time_coverage < 0.01
    assert [h.code for h in result.hacks] == [2] and "not observed" in result.hacks[0].evidence
    honest = _annotated(_candidate([OWN]))
    assert honest.time_coverage == 1.0 and honest.hacks == []


def test_an_older_report_without_a_timed_profile_reads_the_profiler_pass():
    report = {"integrity": {"gpu": {"kernels": [OWN, CUBLAS]}}}
    assert profiled_kernels(report)["kernels"] == [OWN, CUBLAS]
    assert profiled_kernels({}) == {}


def test_a_kernel_off_the_callers_stream_in_the_timed_region_is_hack_7():
    result = _annotated(_candidate([OWN], off_stream=["mm_kernel"]))
    assert [h.code for h in result.hacks] == [7] and "timed region" in result.hacks[0].evidence


def test_coverages_must_agree_where_the_observed_calls_did_most_of_the_work():
    assert coverage_apart(0.95, 0.9) is None and coverage_apart(0.95, 0.3) is None
    assert coverage_apart(0.95, COVERAGE_AGREEMENT * 0.95 * 0.99) is not None
    assert coverage_apart(0.4, 0.01) is None  # lazy when observed too: the lazy warning's business
    assert coverage_apart(None, 0.01) is None and coverage_apart(0.9, None) is None


def test_launch_bound_epilogue_kernels_do_not_set_the_coverages_apart():
    """Honest round 11: a 24-row loss whose own kernel takes 5 us and whose four PyTorch epilogue
    kernels (a sum, a count, a division) take 4-5 us each, launch-bound: 20 % time coverage by time,
    but the work's coverage (each launch's first 5 us discounted) agrees with the observed calls. A
    library GEMM of 0.4 ms in the unobserved calls is still apart."""
    from drkernel.gym.result import KernelStat
    from drkernel.gym.verdict.coverage import time_coverage, work_time_coverage

    tiny = [KernelStat("ce_kernel", True, 1, 0.005)] + [KernelStat(f"aten_{i}", False, 1, 0.0045) for i in range(4)]
    assert time_coverage(tiny) < 0.25 and coverage_apart(0.9996, time_coverage(tiny)) is not None
    assert work_time_coverage(tiny) == 1.0 and coverage_apart(0.9996, work_time_coverage(tiny)) is None
    gemm = [KernelStat("mm_kernel", True, 1, 0.05), KernelStat("sm90_xmma_gemm", False, 1, 0.4)]
    assert coverage_apart(1.0, work_time_coverage(gemm)) is not None


def test_the_profiled_calls_count_in_the_timed_regions_launches():
    config = SimpleNamespace(warmup_calls=10)
    judge = {"sol_timing": {"n": 100, "median_ms": 0.1, "profiled_ms": 0.1}, "timing_plan": {"extra_warmup": 3}}
    calls = 100 + 10 + 3 + PROFILED_CALLS

    def report(seen):
        return {"integrity": {"own_launches_before_timing": 50, "own_launches": 50 + seen,
                              "call_count_launches": [1, 1]}}

    result = EvalResult(status=Status.CORRECT)
    assert timed_launches(result, config, report(calls), judge) == []
    assert [h.code for h in timed_launches(result, config, report(calls - 1), judge)] == [2]


def test_fewer_profiled_calls_where_inputs_are_large_count_as_fewer():
    config = SimpleNamespace(warmup_calls=10)
    judge = {"sol_timing": {"n": 100, "median_ms": 0.1, "profiled_ms": 0.1, "profiled_calls": 1},
             "timing_plan": {"extra_warmup": 3}}
    report = {"integrity": {"own_launches_before_timing": 0, "own_launches": 114, "call_count_launches": [1]}}
    assert timed_launches(EvalResult(status=Status.CORRECT), config, report, judge) == []
    judge["sol_timing"]["profiled_calls"] = 99  # a claim: never read above the calls the harness makes
    assert [h.code for h in timed_launches(EvalResult(status=Status.CORRECT), config, report, judge)] == [2]


def test_the_profiled_calls_draw_as_many_as_the_budget_holds():
    import torch

    from drkernel.gym.candidate.profiling import _profiled_draws

    drawn = []

    def draw(i):
        drawn.append(i)
        return [torch.zeros(256)]  # 1 KiB a draw

    assert len(_profiled_draws(draw, 40, 3, 1 << 20)) == 3 and drawn == [40, 41, 42]
    drawn.clear()
    assert len(_profiled_draws(draw, 40, 3, 1500)) == 1 and drawn == [40]  # one always
    drawn.clear()

    def short_of_memory(i):
        if i > 40:
            raise torch.cuda.OutOfMemoryError("no room")
        return draw(i)

    assert len(_profiled_draws(short_of_memory, 40, 3, 1 << 20)) == 1


def test_a_kernel_is_own_only_where_the_source_defines_it():
    """The launch watch's names live in the candidate's process: a library kernel's name added there
    is still someone else's, since the source defines no Triton function of that name."""
    result = _annotated(_candidate([OWN, {**CUBLAS, "own": True, "device_time_ms": 3.0}]), op_coverage=0.3)
    assert [(k.name, k.own) for k in result.kernels] == [("mm_kernel", True), ("nvjet_sm90_tst_bf16", False)]
    assert result.time_coverage == 0.25 and [h.code for h in result.hacks] == []
    forged = _annotated(_candidate([{**OWN, "device_time_ms": 0.01}, {**CUBLAS, "own": True, "device_time_ms": 3.0}]))
    assert forged.time_coverage < 0.01 and [h.code for h in forged.hacks] == [2]


def test_device_kernels_per_call_from_the_profilers_records():
    """The parse of the profiler's device records (`device_kernels`): the first record is the harness's
    marker (its stream is the caller's) and is left out, memcpy/memset too; launches and device time
    are per call over ``calls``; a kernel on another stream is named."""
    import torch

    from drkernel.gym.candidate.profiling import device_kernels

    def event(name, start, ns, stream):
        return SimpleNamespace(name=lambda: name, start_ns=lambda: start, duration_ns=lambda: ns,
                               device_resource_id=lambda: stream, device_type=lambda: torch.autograd.DeviceType.CUDA)

    records = [event("marker_add", 0, 10, 7)]
    for call in range(3):
        t = 100 * (call + 1)
        records += [event("mm_kernel", t, 3_000_000, 7), event("Memcpy DtoD", t + 1, 50, 7),
                    event("nvjet_gemm", t + 2, 1_000_000, 9)]
    prof = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: list(reversed(records))))
    found = device_kernels(prof, {"mm_kernel"}, (), calls=3)
    kernels = {k["name"]: k for k in found["kernels"]}
    assert set(kernels) == {"mm_kernel", "nvjet_gemm"}
    assert kernels["mm_kernel"]["own"] and kernels["mm_kernel"]["launches"] == 1
    assert abs(kernels["mm_kernel"]["device_time_ms"] - 3.0) < 1e-9 and not kernels["nvjet_gemm"]["own"]
    assert found["off_stream"] == ["nvjet_gemm"]


def test_a_foreign_kernel_named_like_an_own_one_is_not_counted_as_own():
    """A library kernel (or one run by cuBLAS) that carries an own kernel's name: the launch watch
    counted the own launches of that name while the profile ran; the executions beyond them, the
    longest ones, are listed apart as not own, and the verdict's time coverage leaves them out."""
    import torch

    from drkernel.gym.candidate.profiling import CLASH_SUFFIX, device_kernels

    def event(name, start, ns):
        return SimpleNamespace(name=lambda: name, start_ns=lambda: start, duration_ns=lambda: ns,
                               device_resource_id=lambda: 7, device_type=lambda: torch.autograd.DeviceType.CUDA)

    records = [event("marker_add", 0, 10)]
    for call in range(2):  # per call: the solution's tiny epilogue and a big GEMM under the same name
        t = 100 * (call + 1)
        records += [event("mm_kernel", t, 4_000_000), event("mm_kernel", t + 1, 100_000)]
    prof = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: list(records)))
    found = device_kernels(prof, {"mm_kernel"}, (), calls=2, own_launched={"mm_kernel": 2})
    kernels = {k["name"]: k for k in found["kernels"]}
    assert kernels["mm_kernel"]["own"] and abs(kernels["mm_kernel"]["device_time_ms"] - 0.1) < 1e-9
    foreign = kernels["mm_kernel" + CLASH_SUFFIX]
    assert not foreign["own"] and abs(foreign["device_time_ms"] - 4.0) < 1e-9
    assert found["name_clash"] == ["mm_kernel"]
    same = device_kernels(prof, {"mm_kernel"}, (), calls=2, own_launched={"mm_kernel": 4})
    assert [k["own"] for k in same["kernels"]] == [True] and "name_clash" not in same
    result = _annotated(_candidate(found["kernels"]))
    assert abs(result.time_coverage - 0.1 / 4.1) < 1e-9


def test_library_time_in_the_timed_calls_must_be_explained_by_the_observed_calls():
    """Observed calls that left no work to PyTorch (op coverage 1.0) and profiled timed calls where a
    library GEMM ran 54 % of the device time: the timed calls ran other work (hack 2). The same split
    after observed calls that left PyTorch a tenth of the reference's work, or a launch-sized fill
    beside a tiny own kernel, is no evidence."""
    gemm = {**CUBLAS, "device_time_ms": 1.17}
    switched = _annotated(_candidate([OWN, gemm]), op_coverage=1.0)
    assert [h.code for h in switched.hacks] == [2] and "did not launch" in switched.hacks[0].evidence
    lazy_ish = _annotated(_candidate([OWN, gemm]), op_coverage=0.9)
    assert [h.code for h in lazy_ish.hacks] == []
    fill = {"name": "at::native::vectorized_elementwise_kernel<FillFunctor>", "own": False, "launches": 1,
            "device_time_ms": 0.002, "streams": [7]}
    small = _annotated(_candidate([{**OWN, "device_time_ms": 0.004}, fill]), op_coverage=1.0)
    assert [h.code for h in small.hacks] == [] and small.time_coverage < 0.7


def test_slow_forwards_are_called_fewer_times_in_the_device_checks():
    """The GPU checks that hold the device shared while others' timed regions wait (the hidden-work
    batches, the call-count run) call a slow forward fewer times, never below their least: the
    docstring's worked cases of `calls_within`."""
    from drkernel.gym.candidate.profiling import BATCH_BUDGET_MS, BATCH_LEAST_CALLS, calls_within

    assert calls_within(20, 1.0, BATCH_BUDGET_MS, BATCH_LEAST_CALLS) == 20
    assert calls_within(20, 50.0, BATCH_BUDGET_MS, BATCH_LEAST_CALLS) == 6
    assert calls_within(20, 400.0, BATCH_BUDGET_MS, BATCH_LEAST_CALLS) == BATCH_LEAST_CALLS
    assert calls_within(20, 0.0, BATCH_BUDGET_MS, BATCH_LEAST_CALLS) == 20
