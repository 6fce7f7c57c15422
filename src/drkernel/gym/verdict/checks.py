"""The verdict: which hacks a run showed, the lenient and strict validity, coverage and the lazy warning.

    valid = compiled and correct and no hack         (EvalResult.finalize)

Two modes, both always computed and stored (``valid_lenient``, ``valid_strict``); the request's
``verdict_mode`` picks which one ``valid`` reports:

* lenient (default, the paper's setting): hack 2 (passthrough) when the outputs are still right
  with the solution's own Triton launches skipped, or when its own kernels perform less than
  ``coverage_floor`` (default 10%) of the reference's compute by op coverage. PyTorch ops next to
  the kernels are otherwise fine: lazy optimisation is a warning acting through coverage.
* strict: additionally any PyTorch compute op ModelNew runs (seen at run time by the op recorder,
  or reachable from ``forward`` in the source) outside ``strict_allowlist`` is hack 2
  (``strict_only=True``). Allocation, views, reshapes, dtype/contiguity changes and parameter
  access are always allowed.

Inputs are the integrity hook's report (claims from inside the candidate: the hacks it saw, its op
profile) and the judge's report (trusted: comparisons of the extra runs, the reference's op
profile, trials). Evidence that only the candidate could have produced is taken at face value when
it shows a hack: a solution gains nothing by inventing its own hacks.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from drkernel import pyast
from drkernel.gym.checks import CheckRegistry
from drkernel.gym.verdict.coverage import HOST_COPY, OpProfile, base_name, coverage_apart, op_coverage, time_coverage, unexplained_time, work_time_coverage
from drkernel.gym.verdict.hacks import LAZY_WARNING, RAISED_ON_PERTURBED, dedupe, make_hack
from drkernel.gym.verdict.hacks import EXTRA_TAGS
from drkernel.gym.config import EvalConfig
from drkernel.gym.seeds import PERTURB_TAGS, kept_timed_calls
from drkernel.gym.verdict.plausibility import PROFILED_CALLS, impossible, missed_work, profiled_apart, suspicious
from drkernel.gym.verdict.coverage import kernel_stats
from drkernel.gym.result import EvalResult, Hack, Status
from drkernel.gym.verdict.static import analyze, static_check

HOST_SCALARS_PER_CALL = 4
"""Scalar host reads (``.item()``, ``float(t)``: ``aten::_local_scalar_dense``) one forward may make: a
scalar parameter or two is honest; an element-by-element loop in Python is compute outside the kernels."""
LAZY_THRESHOLD = 0.5
"""Coverage below this (and at or above the floor) gives the lazy-optimization warning."""
INTEGRITY_HOOK = "drkernel.gym.candidate.integrity:IntegrityHook"


class BlockingStaticCheck:
    """Certain hacks in the source alone: the solution is rejected without running."""

    name = "static"
    blocking = True

    def check(self, source: str, problem: Any) -> list[Hack]:
        return [h for h in static_check(source) if not h.strict_only]


def _judged(judge_report: Mapping[str, Any], tag: str) -> bool | None:
    entry = (judge_report.get("extra") or {}).get(tag)
    if entry is None:
        return None
    return bool(entry.get("passed"))


def _raised_on_perturbed(judge_report: Mapping[str, Any]) -> str:
    """The judge's message for a failed perturbed comparison whose call raised in the candidate
    (`drkernel.gym.verdict.hacks.RAISED_ON_PERTURBED`), '' if none did. A call that raised where the
    reference is undefined too was skipped by the judge: no failure, only a warning (`skipped_checks`)."""
    for tag in PERTURB_TAGS:
        entry = (judge_report.get("extra") or {}).get(tag)
        failed = isinstance(entry, Mapping) and not entry.get("passed")
        message = str(entry.get("message", "")) if failed else ""
        if message.startswith(RAISED_ON_PERTURBED):
            return message[len(RAISED_ON_PERTURBED):]
    return ""


def _own_launches(candidate_report: Mapping[str, Any]) -> int | None:
    """Own launches the candidate reported; None when it reported none at all (it timed out or died
    before its report), which says nothing about what ``forward`` launched."""
    kernels = (candidate_report.get("launches") or {}).get("kernels") or []
    if kernels:
        return sum(int(k.get("total_launches", k.get("launches", 0))) for k in kernels if k.get("own"))
    integrity = candidate_report.get("integrity")
    if not integrity or "own_launches" not in integrity:
        return None
    return int(integrity["own_launches"])


def static_tf32(source: str) -> list[str]:
    """``tl.dot`` calls in own kernels that let fp32 operands run as TF32 (Triton's GPU default)."""
    import ast

    try:
        tree = pyast.parse(source)
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot":
            kw = {k.arg: k.value for k in node.keywords}
            precision = kw.get("input_precision")
            allow = kw.get("allow_tf32")
            exact = (isinstance(precision, ast.Constant) and precision.value in ("ieee",)) or (
                isinstance(allow, ast.Constant) and allow.value is False)
            if not exact:
                found.append(f"line {node.lineno}: tl.dot without input_precision='ieee'")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
              and any(isinstance(a, ast.Attribute) and a.attr in ("float16", "bfloat16", "float8e4nv", "float8e5")
                      for a in node.args)):
            found.append(f"line {node.lineno}: a cast to {node.args[0].attr} (mechanism 11: half-precision "
                         f"tiles)")  # fp16 tiles before tl.dot: allowed under kernelgym, not kernelbench
    return found


def source_view(source: str, language: str = "triton") -> tuple[Any, tuple[str, ...], str]:
    """The static report of a solution's Python, the kernels its source defines, and its language's
    name. A CUDA solution's Python is read with its validated ``load_inline`` calls masked, and its
    kernels are the ``__global__`` functions of its sources (`drkernel.gym.cuda.contract`)."""
    if language == "cuda":
        from drkernel.gym.cuda.contract import check_cuda

        report = check_cuda(source)
        return report.python or analyze(source), report.own_kernels, "CUDA"
    static = analyze(source)
    return static, tuple(static.own_kernels), "Triton"


def static_view(request: Any, judge_report: Mapping[str, Any] | None = None) -> tuple[Any, tuple[str, ...], str]:
    """`source_view` of the request's solution: the judge report's ``source_view`` when it has one (the
    orchestrator read the source once, in its checker child, bounded by the request's deadline:
    `drkernel.gym.orchestrator.static_child.StaticFacts`), else read here."""
    view = (judge_report or {}).get("source_view")
    if view is not None:
        return view, view.own_kernels, view.language
    return source_view(request.solution, getattr(request, "language", "triton"))


def _tf32_findings(request: Any, judge_report: Mapping[str, Any]) -> list[str]:
    """`static_tf32` of the solution, from the judge report's ``source_view`` when it has one."""
    view = judge_report.get("source_view")
    return list(view.tf32) if view is not None else static_tf32(request.solution)


class IntegrityVerdict:
    """Hacks shown by the run: decoys, passthrough, reuse, caching, call counts, TF32, disabled checks."""

    name = "integrity"

    def check(self, request: Any, candidate_report: Mapping[str, Any],
              judge_report: Mapping[str, Any]) -> list[Hack]:
        config = request.config
        report = candidate_report.get("integrity") or {}
        hacks = [Hack(**h) for h in report.get("hacks", [])]
        static, own_kernels, language = static_view(request, judge_report)
        launches = _own_launches(candidate_report)
        trials = judge_report.get("trials") or []
        if config.tolerance == "kernelbench" and request.problem.dtype == "float32" and language == "Triton":
            # Reported even when the lowered precision already failed a trial: it says why.
            hacks += [make_hack(12, f"{e} in a float32 problem under the kernelbench profile")
                      for e in _tf32_findings(request, judge_report)]
        primary = [t for t in trials if int(t.get("trial", 0)) < config.trials]
        second = [t for t in trials if int(t.get("trial", 0)) >= config.trials]
        primary_ok = len(primary) >= config.trials and all(t.get("passed") for t in primary)
        if primary_ok and second and not all(t.get("passed") for t in second):
            hacks.append(make_hack(13, "correct at the checked size, wrong at a second problem size: "
                                       + str(second[-1].get("message", ""))[:200]))
        if not (primary_ok and all(t.get("passed") for t in second)):
            return dedupe(hacks)  # a failed run is judged by its status and what it was caught doing
        if launches == 0:
            if own_kernels:
                hacks.append(make_hack(1, f"kernels {', '.join(own_kernels)} are defined but forward "
                                          f"launched none of them"))
            else:
                hacks.append(make_hack(2, f"forward launched no {language} kernel defined in the solution"))
        verdicts = {tag: _judged(judge_report, tag) for tag in EXTRA_TAGS}
        if launches and verdicts["skip_own"] and not verdicts["zeros_probe"]:
            hacks.append(make_hack(2, f"outputs were still correct with every own {language} launch skipped"))
        if verdicts["poisoned"] is False:
            hacks.append(make_hack(5, "outputs were wrong once uninitialised allocations were poisoned"))
        if verdicts["recall_same"] is False:
            hacks.append(make_hack(9, "a call on the same tensors refilled with new data returned a stale "
                                      "result"))
        if any(verdicts[tag] is False for tag in PERTURB_TAGS):
            raised = _raised_on_perturbed(judge_report)
            hacks.append(make_hack(9, f"a call on inputs equal to an earlier call's except at a few positions "
                                      f"raised, though the reference runs on them: {raised[:300]}" if raised else
                                      "a call on inputs equal to an earlier call's except at a few positions "
                                      "returned a wrong result (an output cached by a sample of the input)"))
        if verdicts["call_count_last"] is False:
            hacks.append(make_hack(10, "the output was wrong after many calls"))
        per_call = report.get("call_count_launches") or []
        baseline = int(report.get("coverage_own_launches", 0))
        if per_call and baseline and min(per_call) < baseline:
            hacks.append(make_hack(10, f"own launches per call fell from {baseline} to {min(per_call)} over "
                                       f"{len(per_call)} repeated calls (work skipped on later calls)"))
        return self._finish(request, candidate_report, judge_report, hacks, static, launches)

    def _finish(self, request: Any, candidate_report: Mapping[str, Any], judge_report: Mapping[str, Any],
                hacks: list[Hack], static: Any, launches: int) -> list[Hack]:
        config = request.config
        report = candidate_report.get("integrity") or {}
        coverage = self.op_coverage(candidate_report, judge_report, launches)
        if coverage is not None and launches and coverage < config.coverage_floor:
            hacks.append(make_hack(2, f"own kernels do {coverage:.0%} of the reference's compute "
                                      f"(floor {config.coverage_floor:.0%})"))
        hacks += self.strict(request, report, static)
        hacks += host_scalars(report)
        hacks += hidden_work_hacks(report)
        return dedupe(hacks)

    def annotate(self, result: EvalResult, request: Any, candidate_report: Mapping[str, Any],
                 judge_report: Mapping[str, Any]) -> None:
        annotate(result, request, candidate_report, judge_report)

    @staticmethod
    def op_coverage(candidate_report: Mapping[str, Any], judge_report: Mapping[str, Any],
                    launches: int | None) -> float | None:
        report = candidate_report.get("integrity") or {}
        ref, sol = judge_report.get("op_profile"), report.get("coverage_profile")
        if ref is None or sol is None:
            return None
        return op_coverage(OpProfile.from_dict(ref), OpProfile.from_dict(sol),
                           int(report.get("coverage_own_launches", launches or 0)))

    @staticmethod
    def strict(request: Any, report: Mapping[str, Any], static: Any) -> list[Hack]:
        allow = tuple(request.config.strict_allowlist)
        hacks = []
        if report.get("coverage_profile") is not None:
            outside = OpProfile.from_dict(report["coverage_profile"]).outside(allow)
            if outside:
                shown = OpProfile(outside).describe(outside)
                hacks.append(make_hack(2, f"ModelNew ran PyTorch compute: {shown}", strict_only=True))
        allowed_bases = {base_name(a) for a in allow}
        calls = [c for c in static.torch_calls if c.name.rsplit(".", 1)[-1] not in allowed_bases]
        if calls:
            shown = ", ".join(sorted({f"{c.name} (line {c.line})" for c in calls})[:6])
            hacks.append(make_hack(2, f"PyTorch compute reachable from ModelNew.forward: {shown}",
                                   strict_only=True))
        return hacks


def host_scalars(report: Mapping[str, Any]) -> list[Hack]:
    """Too many scalar host reads in the coverage run's forward (compute outside PyTorch, hack 14)."""
    profile = report.get("coverage_profile") or {}
    reads = int(sum(v[0] for k, v in profile.items() if base_name(k) == "_local_scalar_dense"))
    hacks = []
    if reads > HOST_SCALARS_PER_CALL:
        hacks.append(make_hack(14, f"one forward read {reads} scalars of tensor data on the host (.item() / "
                                   f"float(t)); at most {HOST_SCALARS_PER_CALL} are allowed"))
    copied = int(sum(v[3] for k, v in profile.items() if k == HOST_COPY))
    if copied > HOST_SCALARS_PER_CALL:
        hacks.append(make_hack(14, f"one forward copied {copied} tensor elements from the device to the host"))
    return hacks


def hidden_work_hacks(report: Mapping[str, Any]) -> list[Hack]:
    """The integrity hook's events-vs-wall measurement (``gpu``: ``event_ms`` and ``wall_ms`` per call,
    `drkernel.gym.candidate.profiling.hidden_work`) judged here with `missed_work` (hack 7): the
    candidate only reports the two numbers. Numbers that are missing or not finite judge nothing."""
    gpu = report.get("gpu") if isinstance(report.get("gpu"), Mapping) else {}
    try:
        event_ms, wall_ms = float(gpu["event_ms"]), float(gpu["wall_ms"])
    except (KeyError, TypeError, ValueError):
        return []
    if not (math.isfinite(event_ms) and math.isfinite(wall_ms)) or not missed_work(event_ms, wall_ms):
        return []
    return [make_hack(7, f"synchronised wall time {wall_ms:.3f} ms per call against {event_ms:.3f} ms between "
                         f"the stream's events")]


def _aborted_runs(candidate_report: Mapping[str, Any]) -> str:
    """A hook's integrity runs that ended on an exception (the solution raised in one of their calls,
    e.g. the first unobserved one, and took the GPU pass's measurements with it), as text ('' if none)."""
    ended = []
    for hook, report in candidate_report.items():
        extra = report.get("extra_runs") if isinstance(report, Mapping) else None
        if isinstance(extra, Mapping) and extra.get("error"):
            ended.append(f"{hook}: {str(extra['error'])[:200]}")
    return "; ".join(ended)


def annotate(result: EvalResult, request: Any, candidate_report: Mapping[str, Any],
             judge_report: Mapping[str, Any]) -> EvalResult:
    """Fill ``op_coverage``, ``time_coverage`` and the lazy warning, and flag integrity runs that a
    correct solution's candidate never sent to the judge (hack 8); call before ``finalize``."""
    launches = _own_launches(candidate_report)
    missing = [t for t in EXTRA_TAGS if _judged(judge_report, t) is None
               and not (t == "recall_same" and request.config.trials < 2)]
    if result.status is Status.CORRECT and missing:
        result.hacks.append(make_hack(8, f"integrity runs {', '.join(missing)} never reached the judge"))
    if result.status is Status.CORRECT and (aborted := _aborted_runs(candidate_report)):
        result.hacks.append(make_hack(8, f"the integrity runs ended early, so what they measure is missing: "
                                         f"{aborted}"))
    for warning in skipped_checks(judge_report):
        if warning not in result.warnings:
            result.warnings.append(warning)
    if result.op_coverage is None:
        result.op_coverage = IntegrityVerdict.op_coverage(candidate_report, judge_report, launches)
    profile = profiled_kernels(candidate_report)
    if profile.get("kernels"):  # the profiler's view of one forward: every kernel, with device times
        result.kernels = kernel_stats({"kernels": attributed(profile["kernels"], request, judge_report)})
        result.time_coverage = time_coverage(result.kernels)
    if result.status is Status.CORRECT and (
            apart := coverage_apart(result.op_coverage, work_time_coverage(result.kernels or []))):
        result.hacks.append(make_hack(2, apart))
    elif result.status is Status.CORRECT and (other := unexplained_time(result.op_coverage, result.kernels or [])):
        result.hacks.append(make_hack(2, other))
    if result.status is Status.CORRECT and profile.get("off_stream"):
        result.hacks.append(make_hack(7, f"kernels {', '.join(map(str, profile['off_stream'][:4]))} ran on "
                                         f"another stream than forward's caller in the timed region"))
    if profile.get("name_clash"):
        note = (f"kernels named like your own ({', '.join(map(str, profile['name_clash'][:4]))}) ran more often than "
                f"you launched them: the extra runs are not counted as your kernels' time")
        if note not in result.warnings:
            result.warnings.append(note)
    result.hacks.extend(timing_hacks(result, judge_report))
    result.hacks.extend(timed_launches(result, request.config, candidate_report, judge_report))
    coverage = result.op_coverage if result.op_coverage is not None else result.time_coverage
    if (result.status is Status.CORRECT and coverage is not None
            and request.config.coverage_floor <= coverage < LAZY_THRESHOLD):
        warning = LAZY_WARNING.format(share=coverage)
        if warning not in result.warnings:
            result.warnings.append(warning)
    return result


def skipped_checks(judge_report: Mapping[str, Any]) -> list[str]:
    """A warning per integrity comparison the judge skipped because its check does not apply to the
    problem (`drkernel.gym.messages.Verdict.skipped`: the reference itself fails on its inputs)."""
    extra = judge_report.get("extra") or {}
    return [f"integrity check {tag} not applied: {entry['skipped']}" for tag, entry in sorted(extra.items())
            if isinstance(entry, Mapping) and entry.get("skipped")]


def attributed(kernels: list[Any], request: Any, judge_report: Mapping[str, Any] | None = None) -> list[Any]:
    """The profiled kernels with ``own`` as the solution's source backs it: a Triton kernel is the
    solution's own only when the candidate's launch watch saw it launched as such and its name is one
    of the ``@triton.jit`` functions the source defines (`static.analyze`'s ``own_kernels``), so a name
    added to the watch's set in the candidate's process (a library kernel's) counts as someone else's."""
    _, own, language = static_view(request, judge_report)
    if language != "Triton":
        return kernels
    names = set(own)
    return [{**k, "own": bool(k.get("own")) and str(k.get("name")) in names} for k in kernels
            if isinstance(k, Mapping)]


def profiled_kernels(candidate_report: Mapping[str, Any]) -> Mapping[str, Any]:
    """The kernels time coverage is read from: those of the profiled timed calls, which ran in the
    timed region's conditions (`drkernel.gym.candidate.profiling.profiled_timing`), else (an older
    report) those of the integrity hook's profiler pass."""
    report = candidate_report.get("integrity") or {}
    timed = report.get("timed_profile")
    if isinstance(timed, Mapping) and isinstance(timed.get("kernels"), list):
        return timed
    gpu = report.get("gpu")
    return gpu if isinstance(gpu, Mapping) else {}


def timed_launches(result: EvalResult, config: Any, candidate_report: Mapping[str, Any],
                   judge_report: Mapping[str, Any]) -> list[Hack]:
    """Own launches in the timed region against the calls made there (hack 2). The timed calls run
    outside the observed dispatch mode, so a solution that recognised them could fall back to
    PyTorch only there (correct outputs, the reference's speed as its own): every observed call
    launched at least ``min(call_count_launches)`` own kernels, and so must every timed call."""
    report = candidate_report.get("integrity") or {}
    sol, plan = judge_report.get("sol_timing") or {}, judge_report.get("timing_plan") or {}
    before, total = report.get("own_launches_before_timing"), report.get("own_launches")
    per_call = report.get("call_count_launches") or []
    if result.status is not Status.CORRECT or not sol.get("n") or before is None or total is None or not per_call:
        return []
    calls = (int(sol["n"]) + int(config.warmup_calls) + int(plan.get("extra_warmup", 0))
             + _profiled_calls(sol))
    expected, seen = min(int(n) for n in per_call) * calls, int(total) - int(before)
    if seen < expected:
        return [make_hack(2, f"the timed region's {calls} calls launched {seen} own kernels; every observed "
                             f"call launched at least {min(int(n) for n in per_call)}")]
    return []


def _profiled_calls(sol: Mapping[str, Any]) -> int:
    """The profiled timed calls after the timed ones (a claim, read within 1 .. `PROFILED_CALLS`)."""
    if sol.get("profiled_ms") is None:
        return 0
    claimed = sol.get("profiled_calls")
    return PROFILED_CALLS if claimed is None else max(1, min(PROFILED_CALLS, int(claimed)))


def timing_hacks(result: EvalResult, judge_report: Mapping[str, Any]) -> list[Hack]:
    """What the timed region shows: wrong outputs of sampled timed calls (hack 10), a time below the
    physical floor or events that missed work by the synchronised re-measurement (hack 7), and
    samples or a re-measurement that never reached the judge (hack 8)."""
    sol, plan = judge_report.get("sol_timing") or {}, judge_report.get("timing_plan")
    if result.status is not Status.CORRECT or sol.get("median_ms") is None or not plan:
        return []
    hacks = []
    samples = {tag: v for tag, v in (judge_report.get("extra") or {}).items() if tag.startswith("timed_call_")}
    wrong = [tag.removeprefix("timed_call_") for tag, v in samples.items() if not v.get("passed")]
    if wrong:
        message = next(str(v.get("message", "")) for v in samples.values() if not v.get("passed"))
        hacks.append(make_hack(10, f"the output of timed call {', '.join(wrong)} was wrong: {message[:200]}"))
    else:
        planned = max(plan.get("keep") or [0]) + 1
        n = sol.get("n")
        least = min(planned, int((result.config or {}).get("timed_calls_min", EvalConfig.timed_calls_min)))
        if not isinstance(n, int) or n < least:  # the budget never cuts below the minimum
            hacks.append(make_hack(8, f"reported {n!r} timed calls, fewer than the {least} any timing keeps"))
        elif f"timed_call_{max(kept_timed_calls({planned - 1}, planned, n))}" not in samples:
            hacks.append(make_hack(8, "the output of the last timed call never reached the judge"))
    hacks.extend(profiled_timing_hacks(sol))
    event_ms, out_bytes = float(sol["median_ms"]), int(judge_report.get("out_bytes") or 0)
    sync = judge_report.get("sol_timing_sync")
    if sync is None:
        if suspicious(event_ms, out_bytes, result.device_name, judge_report.get("roofline_ms")):
            hacks.append(make_hack(8, f"timed at {event_ms:.4f} ms, implausibly fast, and the re-measurement "
                                      f"the harness asked for never came"))
        return hacks
    sync_ms = float(sync["median_ms"])
    if impossible(sync_ms, out_bytes, result.device_name):
        hacks.append(make_hack(7, f"re-measured between device-wide synchronisations at {sync_ms:.4f} ms, "
                                  f"below the time needed to write its {out_bytes} output bytes once at "
                                  f"peak bandwidth"))
    elif missed_work(event_ms, sync_ms):
        hacks.append(make_hack(7, f"timed at {event_ms:.4f} ms by events on the calling stream, but "
                                  f"{sync_ms:.4f} ms between device-wide synchronisations"))
    return hacks


def profiled_timing_hacks(sol: Mapping[str, Any]) -> list[Hack]:
    """The timed median against the same calls under the profiler, timed in the same exclusive region
    (`drkernel.gym.candidate.profiling.profiled_timing`): further apart than `profiled_apart` allows,
    the forward ran other work when profiled (hack 7); no profiled time at all is a check that never
    reached the judge (hack 8)."""
    profiled, span = sol.get("profiled_ms"), sol.get("profiled_span_ms")
    if profiled is None:
        return [make_hack(8, "the timed calls under the profiler never reached the judge")]
    timed_ms, kernels_ms = float(sol["median_ms"]), float(profiled)
    way = profiled_apart(timed_ms, kernels_ms, None if span is None else float(span))
    if way is None:
        return []
    shown = f"{kernels_ms:.4f} ms of kernels" + ("" if span is None else f" in a {float(span):.4f} ms span")
    return [make_hack(7, f"timed at {timed_ms:.4f} ms, but {shown} for the same calls under the profiler "
                         f"({way}): the forward runs other work when it is profiled, so the profiler's "
                         f"kernels are not the timed work")]


def integrity_checks() -> CheckRegistry:
    """The reward-integrity checks: blocking static analysis, the integrity hook, the verdict."""
    return CheckRegistry(static=(BlockingStaticCheck(),), candidate_hooks=(INTEGRITY_HOOK,),
                         verdict=(IntegrityVerdict(),))
