"""`InProcessEvaluator`: the orchestrator of the trust boundary.

It never imports solution code and never touches CUDA (it does not even import torch). Per device it
holds a trusted judge and a warm pool of candidate children (`DeviceRuntime`); per solution it runs
static checks, hands the job to a fresh candidate (`CandidateSession`), lets the judge compare what
the candidate exports, times the reference (cached) and the solution inside an exclusive region,
runs verdict checks, and returns an `EvalResult`. A bad solution is a result; only failures of our
own machinery raise (`InfrastructureError`, `JudgeError` for a reference that cannot run), and a
lost judge is restarted and the evaluation retried once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import random
import threading
import time
from dataclasses import asdict, replace
from typing import Any, Iterator, Sequence

from drkernel.errors import ConfigError, InfrastructureError
from drkernel.gym.checks import CheckRegistry, default_checks
from drkernel.gym.compile_cache import CompileCache
from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym import provenance
from drkernel.gym.messages import Job, NativeBuild, Prepared, TimeReference, Timed, timing_samples
from drkernel.gym.orchestrator.judge_pool import JUDGE_ROUTINGS
from drkernel.gym.orchestrator.own_judge import OwnJudge, needs_own_judge
from drkernel.gym.orchestrator.refcache import TIMING_FIELDS, ReferenceTimingCache, reference_key
from drkernel.gym.provenance import read_clocks
from drkernel.gym.result import EvalResult, KernelStat, Provenance, Status, TimingStats, TrialResult
from drkernel.gym.roofline import NOMINAL_BANDWIDTH, work_of
from drkernel.gym.orchestrator.runtime import (DeviceRuntime, JudgeLost, JudgeOutOfMemory, OuterLock, WaitCancelled,
                                              cancellable_waits)
from drkernel.gym.seeds import SeedPlan, call_pool, plan_seeds, public_seed, replayed_plan, with_distribution
from drkernel.gym.verdict.assemble import (CandidateFacts, CheckFacts, ErrorReport, Facts, RequestFacts,
                                           TimingFacts, assemble)
from drkernel.gym.verdict.coverage import OpProfile
from drkernel.gym.orchestrator.sandbox import SECCOMP_ENV, make_runner
from drkernel.gym.orchestrator.session import CandidateSession, SessionOutcome
from drkernel.gym.orchestrator.static_child import StaticChecks, StaticFacts, StaticTimeout

log = logging.getLogger(__name__)
STAGE_LOGGER = "drkernel.gym.stages"
stage_log = logging.getLogger(STAGE_LOGGER)
CPU_INPUT_BUDGET = 1 << 30
GPU_INPUT_FRACTION = 0.1  # judge and candidate both hold full-size tensors
CPU_TIMING_NOTE = "not timed: CPU mode runs kernels in the Triton interpreter, whose times mean nothing"
REMEASURE_CALLS = 30


def timing_plan(cfg: EvalConfig) -> dict[str, Any]:
    """What the candidate's timed region does beyond the config, drawn here where the solution cannot
    see it being drawn: a random number of extra warm-up calls (so the timed calls' positions in
    the call sequence are unknown), the timed calls whose outputs the judge checks (the last one and
    one at random: hack 10 when they are wrong), and how many calls a re-measurement takes."""
    rng = random.SystemRandom()
    calls = max(1, cfg.timed_calls)
    return {"extra_warmup": rng.randrange(0, cfg.warmup_calls + 1),
            "keep": sorted({rng.randrange(0, calls), calls - 1}), "remeasure_calls": REMEASURE_CALLS}


class InProcessEvaluator:
    """Evaluate solutions on this machine (the `Evaluator` protocol).

    Args:
        device: ``auto`` (cuda when the judge sees one, else cpu), ``cpu``, ``cuda`` or ``cuda:N``.
            A request whose config names another device gets a runtime of its own.
        concurrency: candidates in flight per device (correctness runs share the device; timed
            regions take it exclusively).
        pool_size: warm candidate children kept ready per device.
        triton_cache_dir: ``TRITON_CACHE_DIR`` shared by all children (default: Triton's own).
        checks: the reward-integrity checks to run (default: `default_checks()`).
        reference_cache_dir: where reference timings persist (in memory only when None).
        cache_reference_timings: reuse a reference timing for the same problem, GPU, versions, config.
        unsafe_no_sandbox: run judge and candidates without the OS sandbox (`drkernel.gym.orchestrator.sandbox`).
            Only for code you trust; without it the evaluator refuses to start when bwrap does not
            work here. Under the sandbox every child has a private Triton cache and
            ``triton_cache_dir`` applies to unsandboxed children only.
        zygote: fork candidates from a zygote per device (`drkernel.gym.candidate.zygote`: torch and
            triton imported once; each fork walled off in namespaces of its own inside the sandbox).
            Sandboxed runs only; where the kernel refuses the nested namespaces the evaluator warns
            and starts fresh processes.
        judges: judge processes per device (0: two on a CUDA device, one on CPU). A candidate's job
            sticks to one judge; more judges compare more candidates' trials at once, each costs a
            CUDA context and a reference model cache on the device.
        seccomp: candidates install the seccomp filter (`drkernel.gym.candidate.seccomp`; never without
            the sandbox). Off only to test the OS sandbox's walls alone.
        compile_cache_dir: keep the kernels a candidate compiled for later evaluations of the same
            solution on the same problem, device and versions (`drkernel.gym.compile_cache`); off
            (None) by default.
        judge_routing: ``sticky`` (default: a job's requests all go to one judge) or ``shared`` (each
            request to a free judge, the job's last preferred; `drkernel.gym.orchestrator.judge_pool`).
        region_batch: ``(k, t)``: timed regions that wait block new candidate sessions only once ``k``
            wait or the oldest has waited ``t`` seconds, so the device drains once for several regions;
            a session waiting for its region gives its slot to the next evaluation (`runtime.RWLock`,
            `runtime.Slots`). None (default): a waiting region blocks new sessions at once.
        device_lock: the device's lock among processes (`runtime.OuterLock`), held exclusively around
            every timed region and reference timing besides this gym's own lock; None (default): none.
    """

    def __init__(self, device: str = "auto", concurrency: int = 2, pool_size: int = 2,
                 triton_cache_dir: str | None = None, checks: CheckRegistry | None = None,
                 reference_cache_dir: str | None = None, cache_reference_timings: bool = True,
                 unsafe_no_sandbox: bool = False, zygote: bool = True, judges: int = 0,
                 seccomp: bool = True, compile_cache_dir: str | None = None,
                 judge_routing: str = "sticky", region_batch: tuple[int, float] | None = None,
                 device_lock: OuterLock | None = None) -> None:
        EvalConfig(device=device)  # validates the device string
        if judge_routing not in JUDGE_ROUTINGS:
            raise ConfigError(f"judge_routing {judge_routing!r}: expected one of {', '.join(JUDGE_ROUTINGS)}")
        if region_batch is not None and not (len(region_batch) == 2 and int(region_batch[0]) >= 1
                                             and float(region_batch[1]) >= 0):
            raise ConfigError(f"region_batch {region_batch!r}: expected (regions >= 1, seconds >= 0)")
        self.judge_routing = judge_routing
        self.region_batch = None if region_batch is None else (int(region_batch[0]), float(region_batch[1]))
        self.device_lock = device_lock
        self.compile_cache = CompileCache(compile_cache_dir) if compile_cache_dir else None
        self.zygote = zygote
        self.judges = max(0, judges)
        self.runner = make_runner(unsafe_no_sandbox)  # refuses (SandboxUnavailable) without a working sandbox
        self.concurrency = max(1, concurrency)
        self.pool_size = max(0, pool_size)
        self.env = {"TRITON_CACHE_DIR": triton_cache_dir} if triton_cache_dir else {}
        if not seccomp:
            self.env[SECCOMP_ENV] = "0"
        self.checks = checks if checks is not None else default_checks()
        self.static = StaticChecks(self.checks.static)
        self.ref_cache = ReferenceTimingCache(reference_cache_dir)
        self.cache_reference_timings = cache_reference_timings
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._closed = False
        self._running: dict[int, Cancellation] = {}  # thread ident -> its running evaluation's
        self.default_device = device
        self.memory_share: int | None = None  # `limit_host_memory`
        self._runtimes: dict[str, DeviceRuntime] = {device: self._new_runtime(device)}

    # -- Evaluator protocol --------------------------------------------------------------------

    def evaluate(self, request: EvalRequest, native: Sequence[tuple[NativeBuild, bytes]] = (),
                 static: StaticFacts | None = None) -> EvalResult:
        """Evaluate one solution; a bad solution is a result, never an exception. ``native``: a CUDA
        solution's builds with their libraries (from `drkernel.gym.cuda.evaluate`, which has checked
        its contract, so the Triton static checks do not run), handed to its candidate; ``static``:
        what `read_source` read from it there (read here when None)."""
        with self._registered() as running:
            for attempt in range(2):
                try:
                    with cancellable_waits(lambda: running.cancelled):
                        return self._evaluate(request, native, static)
                except (WaitCancelled, StaticTimeout) as e:  # stopped before its candidate ran
                    status = Status.TIMEOUT if isinstance(e, StaticTimeout) else Status.CRASHED
                    return EvalResult(status=status, problem_key=request.problem.key,
                                      request_id=request.request_id, device=request.config.device,
                                      error=str(e)).finalize()
                except (JudgeLost, JudgeOutOfMemory) as e:  # the infrastructure's, not the solution's: once more
                    what = "lost" if isinstance(e, JudgeLost) else "out of device memory"
                    if attempt:
                        raise InfrastructureError(f"the judge was {what} twice evaluating {request.problem.key}") from e
                    log.warning("judge %s, retrying %s once: %s", what, request.problem.key, str(e).splitlines()[0])
            raise AssertionError("unreachable")

    def read_source(self, request: EvalRequest) -> StaticFacts:
        """What the evaluation reads from the request's source, read once in a checker child
        (`static_child`) bounded by the request's ``timeout_s`` and by `cancel_thread`: raises
        `StaticTimeout` or `WaitCancelled` (a CUDA solution's contract, read before its build)."""
        with self._registered() as running, cancellable_waits(lambda: running.cancelled):
            return self._static_checks(request, run_checks=True)

    @contextlib.contextmanager
    def _registered(self) -> Iterator[Cancellation]:
        """This thread's evaluation, registered for `cancel_thread` while it runs."""
        ident = threading.get_ident()
        running = Cancellation()
        with self._lock:
            self._running[ident] = running
        try:
            yield running
        finally:
            with self._lock:
                self._running.pop(ident, None)

    async def evaluate_batch(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        return list(await asyncio.gather(*(asyncio.to_thread(self.evaluate, r) for r in requests)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            runtimes = list(self._runtimes.values())
            self._runtimes.clear()
        for rt in runtimes:
            rt.close()
        self.static.close()

    def __enter__(self) -> "InProcessEvaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def device_info(self) -> dict[str, Any]:
        """The default device: name, in-flight candidates, pool size (for the workers endpoint)."""
        rt = self._runtime(self.default_device)
        return rt.info()

    def limit_host_memory(self, per_evaluation_bytes: int) -> None:
        """Bound the host memory of each evaluation's request code by ``per_evaluation_bytes``, whatever
        ``rss_limit_mb`` a request asks (a service gives each of a worker's slots its share of the
        host): the candidate gets the smaller of the two; where a request's reference runs in a
        judge of its own, the candidate and that judge get half the share each. The request itself
        is not changed; a result that hit the share says so."""
        self.memory_share = max(1, int(per_evaluation_bytes))

    def cancel_thread(self, ident: int) -> bool:
        """Stop the evaluation on thread ``ident`` (a service job that was cancelled): its candidate
        and the judge of its own (a request's reference), now and whichever of them starts later;
        the evaluation then ends at once (a crash result, or the reference's failure). False when
        no evaluation runs there."""
        with self._lock:
            running = self._running.get(ident)
        if running is None:
            return False
        running.cancel()
        return True

    @contextlib.contextmanager
    def _cancellable(self, part: Any) -> Iterator[Any]:
        """``part`` (a `CandidateSession`, an `OwnJudge`) joins this thread's evaluation's cancellation."""
        with self._lock:
            running = self._running.get(threading.get_ident())
        if running is None:  # evaluated outside `evaluate` (`warm`): nothing can cancel it
            yield part
            return
        with running.joined(part):
            yield part

    def _run_cancellable(self, session: CandidateSession) -> SessionOutcome:
        with self._cancellable(session):
            return session.run()

    # -- runtimes -----------------------------------------------------------------------------

    def _new_runtime(self, device: str) -> DeviceRuntime:
        return DeviceRuntime(device, pool_size=self.pool_size, concurrency=self.concurrency, env=self.env,
                             runner=self.runner, zygote=self.zygote, judges=self.judges,
                             compile_cache=self.compile_cache, judge_routing=self.judge_routing,
                             region_batch=self.region_batch, outer_lock=self.device_lock)

    def _runtime(self, device: str) -> DeviceRuntime:
        with self._lock:
            if self._closed:
                raise InfrastructureError("the evaluator is closed")
            default = self._runtimes[self.default_device]
        default.wait_ready()
        if device in ("auto", self.default_device):
            return default
        name = "cuda:0" if device == "cuda" else device
        if name == default.device:
            return default
        with self._lock:
            if name not in self._runtimes:
                self._runtimes[name] = self._new_runtime(name)
            rt = self._runtimes[name]
        return rt.wait_ready()

    # -- one evaluation -----------------------------------------------------------------------

    def _evaluate(self, request: EvalRequest, native: Sequence[tuple[NativeBuild, bytes]] = (),
                  static: StaticFacts | None = None) -> EvalResult:
        t0 = time.monotonic()
        cfg = request.config
        facts = Facts(RequestFacts(request.problem.key, request.request_id, cfg.tolerance, cfg.verdict_mode,
                                   cfg.to_dict(), request.solution,
                                   hashlib.sha256(request.solution.encode()).hexdigest()))
        stages: dict[str, float] = {}
        _announce(request, "static checks")
        static = static or self._static_checks(request, run_checks=not native)
        stages["static_checks"] = time.monotonic() - t0
        if static.blocked:
            return self._done(replace(facts, checks=CheckFacts(static.hacks, blocked=True)), stages, t0)

        rt = self._runtime(cfg.device)
        judge_limit = memory_limit(cfg.rss_limit_mb, self.memory_share, own_judge=True)
        with _judge_of(request, rt, *judge_limit, self._cancellable) as judge:
            return self._run_job(request, facts, static, stages, t0, rt, judge, native)

    def _run_job(self, request: EvalRequest, facts: Facts, static: StaticFacts, stages: dict[str, float], t0: float,
                 rt: DeviceRuntime, judge: OwnJudge | None,
                 native: Sequence[tuple[NativeBuild, bytes]] = ()) -> EvalResult:
        """Prepare, run the candidate, check and time (``judge``: the job's own, for a request's reference;
        ``static``: what the checker child read from the source, the only reading of it here)."""
        cfg = request.config
        facts = replace(facts, request=replace(
            facts.request, device=rt.device, device_name=rt.device_name, cpu_mode=not rt.is_cuda,
            versions=dict(rt.hello.get("versions", {})), backend_flags=dict(rt.hello.get("backend_flags", {}))))
        t = time.monotonic()
        _announce(request, f"running the reference on {rt.device_name}")
        prepared = rt.prepare(request.problem, cfg, judge)
        stages["prepare"] = time.monotonic() - t
        job, plan = self._job(request, prepared, rt, tuple(b for b, _ in native))
        job_id = f"{next(self._ids)}-{facts.request.solution_hash[:8]}"
        _announce(request, f"running the solution in a fresh candidate process ({cfg.trials} trials, "
                           f"limit {cfg.timeout_s:g} s)")
        clocks_start = read_clocks(rt.device) if job["timing"] else None
        limit = memory_limit(cfg.rss_limit_mb, self.memory_share, own_judge=judge is not None)
        with rt.slot(prepared.input_bytes):  # the memory claim is empty on CPU
            session = CandidateSession(rt, job, job_id, cfg.tolerance, job["weight_seed"], cfg.timeout_s,
                                       limit[0], judge, b"".join(lib for _, lib in native), static.functions)
            out = self._run_cancellable(session)
        _session_stages(stages, out)
        candidate = candidate_facts(out, job, limit)
        checks = self._verdict_checks(request, replace(facts, candidate=candidate, checks=CheckFacts(static.hacks)),
                                      out, job, prepared, stages, static)
        timing = self._timing(assemble(replace(facts, candidate=candidate)).status, out, rt, job, cfg, stages, judge)
        clocks_end = read_clocks(rt.device) if clocks_start is not None else None
        work = (work_of(prepared.op_profile, prepared.input_bytes, out.out_bytes)
                if prepared.op_profile is not None else None)
        return self._done(replace(facts, candidate=candidate, checks=checks, timing=timing, work=work,
                                  provenance=_provenance(request, facts.request, candidate, asdict(plan),
                                                         clocks_start, clocks_end)), stages, t0)

    def _verdict_checks(self, request: EvalRequest, facts: Facts, out: SessionOutcome, job: dict[str, Any],
                        prepared: Prepared, stages: dict[str, float], static: StaticFacts) -> CheckFacts:
        """Run the verdict checks on a provisional result (they read it and add to it) and keep what
        they found as facts; the result itself is assembled later, once, from those. They read the
        source through ``static`` (the judge report's ``source_view``), never again here."""
        judge_report = {"trials": out.trials, "extra": out.extra, "sol_wall_s": out.sol_wall_s,
                        "sol_timing": out.sol_timing, "sol_timing_sync": out.sol_timing_sync,
                        "out_bytes": out.out_bytes, "timing_plan": job["timing_plan"] if job["timing"] else None,
                        "roofline_ms": job["roofline_ms"],
                        "lock_wait_s": out.lock_wait_s,
                        "op_profile": prepared.op_profile, "source_view": static}
        candidate_report = dict((out.done or {}).get("reports") or {})
        for hook, report in candidate_report.items():  # hooks may account for their own runs' cost
            seconds = report.get("seconds") if isinstance(report, dict) else None
            for name, value in (seconds if isinstance(seconds, dict) else {}).items():
                if isinstance(value, (int, float)):
                    stages[f"{hook}.{str(name)[:40]}"] = float(value)
        for hook, extra in out.hook_extra.items():
            candidate_report.setdefault(hook, {})["extra_runs"] = extra
        candidate_report["backend_flags_after"] = (out.done or {}).get("backend_flags")
        provisional = assemble(facts)
        _announce(request, f"{provisional.status.value}; verdict checks")
        for check in self.checks.verdict:
            provisional.hacks.extend(check.check(request, candidate_report, judge_report))
            annotate = getattr(check, "annotate", None)  # optional: fills coverage and warnings
            if annotate is not None:
                annotate(provisional, request, candidate_report, judge_report)
        return CheckFacts(tuple(provisional.hacks), warnings=tuple(provisional.warnings),
                          op_coverage=provisional.op_coverage, time_coverage=provisional.time_coverage,
                          kernels=tuple(provisional.kernels))

    def _static_checks(self, request: EvalRequest, run_checks: bool) -> StaticFacts:
        """The one reading of the source: in a checker child, bounded by the request's ``timeout_s``
        and its cancellation (`static_child`); the checks run unless ``run_checks`` is False (a CUDA
        solution, whose contract was checked before)."""
        return self.static.run(request.solution, request.problem, request.config.timeout_s, self._cancellable,
                               getattr(request, "language", "triton"), run_checks)

    def _job(self, request: EvalRequest, prepared: Prepared, rt: DeviceRuntime,
             native: tuple[NativeBuild, ...] = ()) -> tuple[dict[str, Any], SeedPlan]:
        cfg = request.config
        if request.seed_plan is None:
            plan = plan_seeds(cfg.seed, cfg.trials, bool(prepared.second_code), prepared.distributions,
                              across=prepared.perturb_across)
        else:  # a replay: the very inputs again, if the plan is one the judge could have drawn
            try:
                plan = replayed_plan(request.seed_plan, cfg.trials, bool(prepared.second_code),
                                     prepared.distributions, across=prepared.perturb_across)
            except ValueError as e:
                raise ConfigError(str(e)) from e
        trials = [{"seed": plan.trials[k], "code": prepared.code, "size": "primary"} for k in range(cfg.trials)]
        if prepared.second_code:
            trials.append({"seed": plan.trials[-1], "code": prepared.second_code, "size": "second"})
        total = int(rt.hello.get("total_memory") or 0)
        budget = int(total * GPU_INPUT_FRACTION) if rt.is_cuda else CPU_INPUT_BUDGET
        digest = hashlib.sha256(request.solution.encode()).hexdigest()[:12]
        return Job({"solution": request.solution, "solution_name": f"solution_{digest}.py",
                "trials": trials, "weight_seed": plan.weight, "config": cfg.to_dict(),
                "hooks": list(self.checks.candidate_hooks), "timing": bool(cfg.timing and rt.is_cuda),
                "timing_seed": plan.timing, "input_budget_bytes": budget, "integrity": plan.to_job(),
                "reference_seed": plan.reference_timing, "contraction_rate": contraction_rate(prepared.op_profile),
                "timing_plan": timing_plan(cfg), "roofline_ms": prepared.roofline_ms}, native).to_header(), plan

    def _timing(self, status: Status, out: SessionOutcome, rt: DeviceRuntime, job: dict[str, Any],
                cfg: EvalConfig, stages: dict[str, float], judge: OwnJudge | None = None) -> TimingFacts:
        if not rt.is_cuda:
            return TimingFacts(CPU_TIMING_NOTE)
        if not cfg.timing:
            return TimingFacts("not timed: timing is off in the config")
        if status is not Status.CORRECT:
            return TimingFacts("not timed: the solution is not correct")
        if out.sol_timing is None:
            return TimingFacts("not timed: the candidate reported no valid timings")
        sol = dict(out.sol_timing)
        sol_samples = sol.pop("samples_ms", None) or ()
        versions = dict(rt.hello.get("versions", {}))
        ref, cached = self._reference_timing(rt, job["trials"][0]["code"], job["weight_seed"], job["reference_seed"],
                                             versions, cfg, stages, judge)
        ref = dict(ref)
        ref_samples = timing_samples(ref, int(ref.get("n", 0))) or ()
        ref.pop("samples_ms", None)
        note = None
        if out.sol_wall_s is not None:
            note = f"solution timed region took {out.sol_wall_s:.3f} s wall (measured by the orchestrator)"
        return TimingFacts(note, TimingStats(**ref), TimingStats(**sol), ref_samples, tuple(sol_samples), cached)

    def _reference_timing(self, rt: DeviceRuntime, code: str, weight_seed: int, seed: int, versions: dict[str, str],
                          cfg: EvalConfig, stages: dict[str, float],
                          judge: OwnJudge | None = None) -> tuple[dict[str, Any], bool]:
        """The reference's timing stats for ``code`` (seed: public, so the reference never sees the
        candidate's secret timing inputs, at the timed calls' distribution, `SeedPlan.reference_timing`)
        and whether they came from the cache. Timed once per key:
        concurrent evaluations of one problem wait for the first one's timing instead of each timing
        it again (measured: 39 problems timed 257 s in a sustained run, most of them several times)."""
        key = reference_key(code, weight_seed, seed, rt.device_name, versions, cfg.to_dict())
        if not self.cache_reference_timings:
            return self._time_reference(rt, code, weight_seed, seed, cfg, stages, judge), False
        with self.ref_cache.timing(key) as cached:
            if cached is not None:
                return cached, True
            stats = self._time_reference(rt, code, weight_seed, seed, cfg, stages, judge)
            self.ref_cache.put(key, stats)
            return stats, False

    def _time_reference(self, rt: DeviceRuntime, code: str, weight_seed: int, seed: int, cfg: EvalConfig,
                        stages: dict[str, float], judge: OwnJudge | None = None) -> dict[str, Any]:
        t = time.monotonic()
        with rt.rw.exclusive(drain=True):  # no candidate in flight: nothing it queued runs inside
            stages["reference_lock_wait"] = time.monotonic() - t
            # the judge gets exactly the fields that key the cache, so the two cannot drift apart
            stats = Timed.from_header(rt.judge_call(
                TimeReference(code, weight_seed, seed, {k: getattr(cfg, k) for k in TIMING_FIELDS}).to_header(),
                judge=judge)).stats
        stages["reference_timing"] = time.monotonic() - t
        # the drain's hold counts as this evaluation's exclusive device time
        held = stages["reference_timing"] - stages["reference_lock_wait"]
        stages["exclusive"] = stages.get("exclusive", 0.0) + held
        return stats

    def warm(self, problems: Sequence[Any], config: EvalConfig | None = None) -> dict[str, float]:
        """Prepare ``problems`` and time their references now, before the evaluations that need them (an
        RL run knows its problems at start: without this, the first evaluation of each problem pays the
        reference's preparation and timing on its critical path, and every candidate on the device
        waits while a reference is timed). Each distribution a timed call may draw (`call_pool`) is
        timed. Returns seconds per problem key; idempotent (cached)."""
        cfg = config or EvalConfig()
        rt = self._runtime(cfg.device)
        versions = dict(rt.hello.get("versions", {}))
        spent: dict[str, float] = {}
        for problem in problems:
            t = time.monotonic()
            prepared = rt.prepare(problem, cfg)
            seed = public_seed(cfg.seed)
            for dist in call_pool(prepared.distributions) if rt.is_cuda and cfg.timing else ():
                self._reference_timing(rt, prepared.code, seed, with_distribution(seed, dist), versions, cfg, {})
            spent[problem.key] = time.monotonic() - t
        return spent

    def _done(self, facts: Facts, stages: dict[str, float], t0: float) -> EvalResult:
        return assemble(replace(facts, stage_seconds=dict(stages), elapsed_s=time.monotonic() - t0))


def memory_limit(rss_limit_mb: int, share: int | None, own_judge: bool) -> tuple[int, str]:
    """The host memory limit in bytes of one process that runs request code, and what set it: the
    request's ``rss_limit_mb``, or the evaluation's ``share`` of the host
    (`InProcessEvaluator.limit_host_memory`; halved where a request's reference has a judge of its
    own, since that judge runs request code too) where that is smaller. E.g. 16384 MB asked, a
    2 GiB share, an own judge: 1 GiB each."""
    asked = rss_limit_mb << 20
    part = None if share is None else share // 2 if own_judge else share
    if part is None or part >= asked:
        return asked, "the request's rss_limit_mb"
    half = ", halved between the candidate and the reference's own judge" if own_judge else ""
    return part, f"the worker's host memory share per evaluation{half}; the request asked {rss_limit_mb} MB"


@contextlib.contextmanager
def _judge_of(request: EvalRequest, rt: DeviceRuntime, rss_limit_bytes: int, limit_source: str,
              cancellable: Any) -> Iterator[OwnJudge | None]:
    """A judge of the evaluation's own when its reference came with the request or runs at full size
    on CPU (`own_judge.needs_own_judge`), else None (the device's shared judges); it joins the
    evaluation's cancellation (``cancellable``)."""
    if not needs_own_judge(request, rt.is_cuda):
        yield None
        return
    judge = OwnJudge(rt, request.config.timeout_s, rss_limit_bytes, limit_source)
    try:
        with cancellable(judge):
            yield judge
    finally:
        judge.close()


class Cancellation:
    """What one running evaluation has that a cancel must stop (its candidate session, the judge of
    its own), each with a ``cancel()``. A cancel reaches every part joined, and every part that
    joins later at once: an evaluation cancelled while its judge starts stops all the same."""

    def __init__(self) -> None:
        self.cancelled = False
        self._parts: list[Any] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        with self._lock:  # held while cancelling: a part cannot leave (and be discarded) meanwhile
            self.cancelled = True
            for part in self._parts:
                part.cancel()

    @contextlib.contextmanager
    def joined(self, part: Any) -> Iterator[None]:
        with self._lock:
            self._parts.append(part)
            if self.cancelled:
                part.cancel()
        try:
            yield
        finally:
            with self._lock:
                self._parts.remove(part)


def _session_stages(stages: dict[str, float], out: SessionOutcome) -> None:
    """The session's own seconds and the candidate's per-stage report, into ``stages``."""
    stages.update({"child_wait": out.child_wait_s, "candidate": out.wall_s, "child_exit": out.exit_s,
                   "judge_release": out.release_s, "judge_compare": out.judge_s,
                   "timing_lock_wait": out.lock_wait_s, "exclusive": out.exclusive_s})
    if out.child_start_s is not None:
        stages["child_start"] = out.child_start_s
    for name, seconds in ((out.done or {}).get("stages") or {}).items():
        if isinstance(seconds, (int, float)):
            stages[str(name)[:40]] = float(seconds)


def candidate_facts(out: SessionOutcome, job: dict[str, Any], limit: tuple[int, str]) -> CandidateFacts:
    """What one candidate run established, read once from its session: the judge's verdict on each
    trial (with the job's seed and size), how the run ended, its kernels and backend flags.
    ``limit``: the candidate's host memory limit and what set it (`memory_limit`)."""
    trials = tuple(TrialResult(trial=v["trial"], seed=job["trials"][v["trial"]]["seed"], passed=bool(v.get("passed")),
                               max_abs_err=v.get("max_abs_err"), max_rel_err=v.get("max_rel_err"),
                               message=str(v.get("message", "")), size=job["trials"][v["trial"]]["size"],
                               degenerate=v.get("degenerate"))
                   for v in out.trials)
    e = out.error
    done = out.done or {}
    return CandidateFacts(
        trials=trials, planned_trials=len(job["trials"]),
        atol=out.trials[0].get("atol") if out.trials else None, rtol=out.trials[0].get("rtol") if out.trials else None,
        timed_out=out.timed_out, oom=out.oom, violation=out.violation,
        error=None if e is None else ErrorReport(e["stage"], e["type"], e["message"], e["traceback"]),
        died=out.died, finished=out.done is not None, returncode=out.returncode, log_tail=out.log_tail,
        solution_path=out.solution_path, timeout_s=float(job["config"]["timeout_s"]),
        rss_limit_mb=limit[0] >> 20, kernels=_kernels(done),
        solution_flags=done.get("backend_flags"),
        warnings=tuple(w for w in (
            out.ipc_fallback and f"outputs were copied through the host: {out.ipc_fallback}",
            out.oom and f"memory limit {limit[0] >> 20} MB: {limit[1]}") if w))


def contraction_rate(op_profile: dict[str, Any] | None) -> float | None:
    """The rate the reference's contractions are priced at (`OpProfile.contraction_rate` on the
    recorder's nominal device): the candidate prices no op of the solution faster."""
    if not op_profile:
        return None
    return OpProfile.from_dict(op_profile).contraction_rate(NOMINAL_BANDWIDTH)


def _kernels(done: dict[str, Any]) -> tuple[KernelStat, ...]:
    kernels = []
    for k in ((done.get("reports") or {}).get("launches") or {}).get("kernels") or []:
        try:
            kernels.append(KernelStat(name=str(k["name"])[:200], own=bool(k["own"]), launches=int(k["launches"])))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(kernels)


def _provenance(request: EvalRequest, r: RequestFacts, c: CandidateFacts, seeds: dict[str, Any],
                clocks_start: dict[str, Any] | None, clocks_end: dict[str, Any] | None) -> Provenance:
    return provenance.build(device_name=r.device_name, versions=r.versions, reference_mode=request.config.reference,
                            reference_flags=r.backend_flags, solution_flags=c.solution_flags,
                            tolerance_profile=r.tolerance_profile, config=r.config,
                            problem_hash=request.problem.code_hash, solution_hash=r.solution_hash, seeds=seeds,
                            clocks_start=clocks_start, clocks_end=clocks_end)


def _announce(request: EvalRequest, stage: str) -> None:
    """Log the stage an evaluation enters (DEBUG on ``STAGE_LOGGER``).

    `drkernel gym eval` shows these lines while it runs, so a person waiting on a slow reference or a
    candidate near its time limit sees where the time goes. DEBUG on a logger of their own, so a
    service or a trainer logging ``drkernel`` at INFO does not get four lines per evaluation.
    """
    stage_log.debug("%s: %s", request.request_id or request.problem.key, stage)
