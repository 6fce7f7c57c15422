"""The verdict assembled once, from typed facts (torch-free, pure).

What decides an `EvalResult` arrives as frozen dataclasses, each read from one source:

    RequestFacts    the request and the judge's device (trusted)
    CandidateFacts  how the candidate's run ended and the judge's verdict on every trial: the
                    candidate's own claims enter only as an error report's text, its kernels' names
                    and its backend flags
    CheckFacts      what the static and verdict checks found (`drkernel.gym.checks`)
    TimingFacts     both sides' timing stats and samples, the reference's from the judge
    Facts           all of them, the reference's work (`drkernel.gym.roofline.Work`) and provenance

and `assemble` turns one `Facts` into the result. Who reads it to audit ``valid``:

    status  = the first of: rejected by a blocking static check, timeout, out of memory, a protocol
              violation, the candidate's error report, a failed trial, a death or a missing ``done``,
              every trial passed (correct), else crashed             (`status_of`)
    valid   = status is correct and no hack the verdict mode counts    (`EvalResult.finalize`)
    speedup = median(reference) / median(solution), only when correct, timed, and both sides ran at
              the declared precision (`drkernel.gym.precision`); its interval from the samples
              (`drkernel.gym.speedup`); sol_fraction from the roofline (`drkernel.gym.roofline`)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from drkernel.gym import precision
from drkernel.gym.result import EvalResult, Hack, KernelStat, Provenance, Status, TimingStats, TrialResult
from drkernel.gym.roofline import Work, peak_for, roofline_ms, sol_fraction
from drkernel.gym.speedup import across_runs, speedup_interval
from drkernel.gym.verdict.classify import classify_error, classify_exit, killed_by_seccomp, trim_tail
from drkernel.gym.verdict.coverage import time_coverage_hack
from drkernel.gym.verdict.hacks import forbidden_syscall_hack, make_hack
from drkernel.gym.messages import SECOND_SIZE_NOTE

TF32_PROFILE = "kernelgym"
"""The tolerance profile under which TF32 arithmetic is allowed (docs/DESIGN.md): fp32 matmuls' speed of
light is then the TF32 tensor-core rate."""


@dataclass(frozen=True)
class RequestFacts:
    problem_key: str
    request_id: str
    tolerance_profile: str
    verdict_mode: str
    config: Mapping[str, Any]
    solution: str
    solution_hash: str
    device: str = ""
    device_name: str = ""
    cpu_mode: bool = True
    versions: Mapping[str, str] = field(default_factory=dict)
    backend_flags: Mapping[str, Any] = field(default_factory=dict)  # the judge's, pinned at its start


@dataclass(frozen=True)
class ErrorReport:
    """The candidate's failure report (`drkernel.gym.messages.Error`, validated on arrival)."""

    stage: str
    type: str
    message: str
    traceback: str = ""


@dataclass(frozen=True)
class CandidateFacts:
    """How one candidate run ended (`drkernel.gym.orchestrator.session.SessionOutcome`, read once)."""

    trials: tuple[TrialResult, ...]
    planned_trials: int
    atol: float | None = None
    rtol: float | None = None
    timed_out: bool = False
    oom: bool = False
    violation: str | None = None
    error: ErrorReport | None = None
    died: bool = False
    finished: bool = False              # its ``done`` arrived
    returncode: int | None = None
    log_tail: str = ""
    solution_path: str | None = None
    timeout_s: float = 0.0
    rss_limit_mb: int = 0
    kernels: tuple[KernelStat, ...] = ()
    solution_flags: Mapping[str, Any] | None = None  # its backend flags after the run (a claim)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckFacts:
    """What the checks found. ``kernels`` (the profiler's view) replaces the candidate's list when set."""

    hacks: tuple[Hack, ...] = ()
    blocked: bool = False               # a blocking static check fired: the solution never ran
    warnings: tuple[str, ...] = ()
    op_coverage: float | None = None
    time_coverage: float | None = None
    kernels: tuple[KernelStat, ...] | None = None


@dataclass(frozen=True)
class TimingFacts:
    """Both sides' timings (``note``: why there are none, or what the orchestrator measured)."""

    note: str | None = None
    reference: TimingStats | None = None
    solution: TimingStats | None = None
    reference_samples: tuple[float, ...] = ()
    solution_samples: tuple[float, ...] = ()
    reference_cached: bool | None = None


@dataclass(frozen=True)
class Facts:
    request: RequestFacts
    candidate: CandidateFacts | None = None  # None: rejected before it ran
    checks: CheckFacts = CheckFacts()
    timing: TimingFacts = TimingFacts()
    work: Work | None = None
    provenance: Provenance | None = None
    stage_seconds: Mapping[str, float] = field(default_factory=dict)
    elapsed_s: float | None = None


def status_of(c: CandidateFacts, request: RequestFacts) -> tuple[Status, str | None]:
    """The status and the error text a human or a model reads (see the module docstring's order)."""
    failed = next((t for t in c.trials if not t.passed), None)
    if c.timed_out:
        return Status.TIMEOUT, f"the solution exceeded the time limit of {c.timeout_s:g} s"
    if c.oom:
        return Status.OUT_OF_MEMORY, f"the candidate's resident memory exceeded {c.rss_limit_mb} MB"
    if c.violation:
        return Status.CRASHED, f"the candidate broke the harness protocol: {c.violation}"
    if c.error is not None:
        e = c.error
        status = classify_error(e.stage, e.type, e.message, e.traceback, cpu_mode=request.cpu_mode,
                                source=request.solution)
        text = e.traceback if e.stage not in ("signature", "no_modelnew") else e.message
        if e.stage == "forward" and e.message.startswith(SECOND_SIZE_NOTE) and text:
            text = f"{text.rstrip()}\n(the forward failed {e.message.split(': ', 1)[0]})"
        return status, trim_tail(text or f"{e.type}: {e.message}", c.solution_path)
    if failed is not None:
        return Status.INCORRECT, f"trial {failed.trial} ({failed.size} size, seed {failed.seed}): {failed.message}"
    if c.died or not c.finished:
        status, message = classify_exit(c.returncode, c.log_tail)
        return status, f"{message}\n{trim_tail(c.log_tail, c.solution_path)}".strip()
    if len(c.trials) == c.planned_trials:
        return Status.CORRECT, None
    return Status.CRASHED, "the candidate finished without running every trial"


@dataclass(frozen=True)
class Speed:
    speedup: float | None = None
    ci: tuple[float, float] | None = None
    level: float | None = None
    note: str | None = None
    comparable: bool = False            # both sides timed, at the declared precision


def speed_of(t: TimingFacts, reference_flags: Mapping[str, Any], solution_flags: Mapping[str, Any] | None) -> Speed:
    """The speedup, its interval and the note; withheld (with the reason) when the two sides did not
    run at the declared precision."""
    if t.reference is None or t.solution is None or t.solution.median_ms <= 0:
        return Speed(note=t.note)
    differ = precision.mismatch("reference", reference_flags) + precision.mismatch("solution", solution_flags)
    if differ:
        return Speed(note="no speedup: " + "; ".join(differ))
    interval = across_runs(speedup_interval(t.reference_samples, t.solution_samples))  # a re-run's too
    return Speed(t.reference.median_ms / t.solution.median_ms,
                 None if interval is None else (interval.low, interval.high),
                 None if interval is None else interval.level, t.note, comparable=True)


def assemble(facts: Facts) -> EvalResult:
    """The one place an `EvalResult` is made from facts; derived flags by `EvalResult.finalize`."""
    r, c, k = facts.request, facts.candidate, facts.checks
    if c is not None:
        status, error = status_of(c, r)
    elif k.blocked:
        status, error = Status.REJECTED, "; ".join(h.message for h in k.hacks)
    else:
        status, error = Status.CRASHED, "the solution was never run"
    speed = speed_of(facts.timing, r.backend_flags, c.solution_flags if c else None)
    hacks = list(k.hacks)
    if c is not None and killed_by_seccomp(c.returncode):
        hacks.append(forbidden_syscall_hack(trim_tail(c.log_tail, c.solution_path)[-300:]))
    high = speed.ci[1] if speed.ci is not None else None
    if status is Status.CORRECT and (low := time_coverage_hack(k.time_coverage, speed.speedup, speedup_high=high)):
        hacks.append(make_hack(2, low))
    peak = peak_for(r.device_name)
    roof = (roofline_ms(facts.work, peak, tf32=r.tolerance_profile == TF32_PROFILE)
            if facts.work is not None and peak is not None else None)
    sol = facts.timing.solution
    return EvalResult(
        status=status, problem_key=r.problem_key, request_id=r.request_id, hacks=hacks,
        warnings=list(dict.fromkeys((*(c.warnings if c else ()), *k.warnings))), error=error, trials=list(c.trials if c else ()), tolerance_profile=r.tolerance_profile,
        atol=c.atol if c else None, rtol=c.rtol if c else None, backend_flags=dict(r.backend_flags),
        device=r.device, device_name=r.device_name, verdict_mode=r.verdict_mode,
        ref_timing=facts.timing.reference, sol_timing=sol,
        speedup=speed.speedup, timing_note=speed.note, reference_cached=facts.timing.reference_cached,
        op_coverage=k.op_coverage, time_coverage=k.time_coverage,
        kernels=list(k.kernels if k.kernels is not None else (c.kernels if c else ())),
        stage_seconds={n: round(v, 6) for n, v in facts.stage_seconds.items()}, versions=dict(r.versions),
        config=dict(r.config), solution_hash=r.solution_hash, elapsed_s=facts.elapsed_s,
        provenance=facts.provenance, speedup_ci=speed.ci, speedup_ci_level=speed.level, roofline_ms=roof,
        sol_fraction=sol_fraction(roof, sol.median_ms) if speed.comparable and sol is not None else None,
    ).finalize()
