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
import hashlib
import itertools
import logging
import random
import threading
import time
from typing import Any, Sequence

from drkernel.errors import InfrastructureError
from drkernel.gym.checks import CheckRegistry, default_checks
from drkernel.gym.verdict.classify import classify_error, classify_exit, trim_tail
from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.messages import Job, Prepared, TimeReference, Timed
from drkernel.gym.orchestrator.refcache import TIMING_FIELDS, ReferenceTimingCache, reference_key
from drkernel.gym.result import EvalResult, Hack, KernelStat, Status, TimingStats, TrialResult
from drkernel.gym.orchestrator.runtime import DeviceRuntime, JudgeLost, JudgeOutOfMemory
from drkernel.gym.seeds import plan_seeds, public_seed
from drkernel.gym.orchestrator.sandbox import make_runner
from drkernel.gym.orchestrator.session import CandidateSession, SessionOutcome

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
    """

    def __init__(self, device: str = "auto", concurrency: int = 2, pool_size: int = 2,
                 triton_cache_dir: str | None = None, checks: CheckRegistry | None = None,
                 reference_cache_dir: str | None = None, cache_reference_timings: bool = True,
                 unsafe_no_sandbox: bool = False, zygote: bool = True, judges: int = 0) -> None:
        EvalConfig(device=device)  # validates the device string
        self.zygote = zygote
        self.judges = max(0, judges)
        self.runner = make_runner(unsafe_no_sandbox)  # refuses (SandboxUnavailable) without a working sandbox
        self.concurrency = max(1, concurrency)
        self.pool_size = max(0, pool_size)
        self.env = {"TRITON_CACHE_DIR": triton_cache_dir} if triton_cache_dir else {}
        self.checks = checks if checks is not None else default_checks()
        self.ref_cache = ReferenceTimingCache(reference_cache_dir)
        self.cache_reference_timings = cache_reference_timings
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._closed = False
        self._sessions: dict[int, CandidateSession] = {}  # thread ident -> its running session
        self.default_device = device
        self._runtimes: dict[str, DeviceRuntime] = {device: self._new_runtime(device)}

    # -- Evaluator protocol --------------------------------------------------------------------

    def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one solution; a bad solution is a result, never an exception."""
        for attempt in range(2):
            try:
                return self._evaluate(request)
            except (JudgeLost, JudgeOutOfMemory) as e:  # the infrastructure's, not the solution's: once more
                what = "lost" if isinstance(e, JudgeLost) else "out of device memory"
                if attempt:
                    raise InfrastructureError(f"the judge was {what} twice evaluating {request.problem.key}") from e
                log.warning("judge %s, retrying %s once: %s", what, request.problem.key, str(e).splitlines()[0])
        raise AssertionError("unreachable")

    async def evaluate_batch(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        return list(await asyncio.gather(*(asyncio.to_thread(self.evaluate, r) for r in requests)))

    def close(self) -> None:
        with self._lock:
            self._closed = True
            runtimes = list(self._runtimes.values())
            self._runtimes.clear()
        for rt in runtimes:
            rt.close()

    def __enter__(self) -> "InProcessEvaluator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def device_info(self) -> dict[str, Any]:
        """The default device: name, in-flight candidates, pool size (for the workers endpoint)."""
        rt = self._runtime(self.default_device)
        return rt.info()

    def cancel_thread(self, ident: int) -> bool:
        """Kill the candidate that the evaluation on thread ``ident`` runs (a service job that was
        cancelled); that evaluation returns a crash result at once. False when none runs there."""
        with self._lock:
            session = self._sessions.get(ident)
        if session is None:
            return False
        session.cancel()
        return True

    def _run_cancellable(self, session: CandidateSession) -> SessionOutcome:
        ident = threading.get_ident()
        with self._lock:
            self._sessions[ident] = session
        try:
            return session.run()
        finally:
            with self._lock:
                self._sessions.pop(ident, None)

    # -- runtimes -----------------------------------------------------------------------------

    def _new_runtime(self, device: str) -> DeviceRuntime:
        return DeviceRuntime(device, pool_size=self.pool_size, concurrency=self.concurrency, env=self.env,
                             runner=self.runner, zygote=self.zygote, judges=self.judges)

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

    def _evaluate(self, request: EvalRequest) -> EvalResult:
        t0 = time.monotonic()
        cfg = request.config
        result = EvalResult(status=Status.CRASHED, problem_key=request.problem.key, request_id=request.request_id,
                            tolerance_profile=cfg.tolerance, verdict_mode=cfg.verdict_mode, config=cfg.to_dict(),
                            solution_hash=hashlib.sha256(request.solution.encode()).hexdigest())
        stages: dict[str, float] = {}
        _announce(request, "static checks")
        blocked = self._static_checks(request, result)
        stages["static_checks"] = time.monotonic() - t0
        if blocked:
            result.status = Status.REJECTED
            result.error = "; ".join(h.message for h in result.hacks)
            return self._done(result, stages, t0)

        rt = self._runtime(cfg.device)
        result.device, result.device_name = rt.device, rt.device_name
        result.versions = dict(rt.hello.get("versions", {}))
        result.backend_flags = dict(rt.hello.get("backend_flags", {}))
        t = time.monotonic()
        _announce(request, f"running the reference on {rt.device_name}")
        prepared = rt.prepare(request.problem, cfg)
        stages["prepare"] = time.monotonic() - t
        job = self._job(request, prepared, rt)
        job_id = f"{next(self._ids)}-{result.solution_hash[:8]}"
        _announce(request, f"running the solution in a fresh candidate process ({cfg.trials} trials, "
                           f"limit {cfg.timeout_s:g} s)")
        with rt.slot(prepared.input_bytes):  # the memory claim is empty on CPU
            session = CandidateSession(rt, job, job_id, cfg.tolerance, job["weight_seed"], cfg.timeout_s,
                                       cfg.rss_limit_mb << 20)
            out = self._run_cancellable(session)
        stages.update({"child_wait": out.child_wait_s, "candidate": out.wall_s, "child_exit": out.exit_s,
                       "judge_release": out.release_s, "judge_compare": out.judge_s,
                       "timing_lock_wait": out.lock_wait_s})
        if out.child_start_s is not None:
            stages["child_start"] = out.child_start_s
        for name, seconds in ((out.done or {}).get("stages") or {}).items():
            if isinstance(seconds, (int, float)):
                stages[str(name)[:40]] = float(seconds)
        self._status(result, out, job, request.solution, cpu_mode=not rt.is_cuda)
        self._kernels(result, out)
        judge_report = {"trials": out.trials, "extra": out.extra, "sol_wall_s": out.sol_wall_s,
                        "sol_timing": out.sol_timing, "sol_timing_sync": out.sol_timing_sync,
                        "out_bytes": out.out_bytes, "timing_plan": job["timing_plan"] if job["timing"] else None,
                        "roofline_ms": job["roofline_ms"],
                        "lock_wait_s": out.lock_wait_s,
                        "op_profile": prepared.op_profile}
        if out.ipc_fallback:
            result.warnings.append(f"outputs were copied through the host: {out.ipc_fallback}")
        candidate_report = dict((out.done or {}).get("reports") or {})
        for hook, report in candidate_report.items():  # hooks may account for their own runs' cost
            seconds = report.get("seconds") if isinstance(report, dict) else None
            for name, value in (seconds if isinstance(seconds, dict) else {}).items():
                if isinstance(value, (int, float)):
                    stages[f"{hook}.{str(name)[:40]}"] = float(value)
        for hook, extra in out.hook_extra.items():
            candidate_report.setdefault(hook, {})["extra_runs"] = extra
        candidate_report["backend_flags_after"] = (out.done or {}).get("backend_flags")
        _announce(request, f"{result.status.value}; verdict checks")
        for check in self.checks.verdict:
            result.hacks.extend(check.check(request, candidate_report, judge_report))
            annotate = getattr(check, "annotate", None)  # optional: fills coverage and warnings
            if annotate is not None:
                annotate(result, request, candidate_report, judge_report)
        self._timing(result, out, rt, job, cfg, stages)
        return self._done(result, stages, t0)

    def _static_checks(self, request: EvalRequest, result: EvalResult) -> bool:
        blocked = False
        for check in self.checks.static:
            found: list[Hack] = check.check(request.solution, request.problem)
            result.hacks.extend(found)
            blocked = blocked or (bool(found) and check.blocking)
        return blocked

    def _job(self, request: EvalRequest, prepared: Prepared, rt: DeviceRuntime) -> dict[str, Any]:
        cfg = request.config
        plan = plan_seeds(cfg.seed, cfg.trials, bool(prepared.second_code))
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
                "reference_seed": plan.reference,
                "timing_plan": timing_plan(cfg), "roofline_ms": prepared.roofline_ms}).to_header()

    def _status(self, result: EvalResult, out: SessionOutcome, job: dict[str, Any], source: str,
                cpu_mode: bool) -> None:
        for verdict in out.trials:
            spec = job["trials"][verdict["trial"]]
            result.trials.append(TrialResult(
                trial=verdict["trial"], seed=spec["seed"], passed=bool(verdict.get("passed")),
                max_abs_err=verdict.get("max_abs_err"), max_rel_err=verdict.get("max_rel_err"),
                message=str(verdict.get("message", "")), size=spec["size"]))
        if out.trials:
            result.atol, result.rtol = out.trials[0].get("atol"), out.trials[0].get("rtol")
        failed = next((t for t in result.trials if not t.passed), None)
        if out.timed_out:
            result.status = Status.TIMEOUT
            result.error = f"the solution exceeded the time limit of {job['config']['timeout_s']:g} s"
        elif out.oom:
            result.status = Status.OUT_OF_MEMORY
            result.error = f"the candidate's resident memory exceeded {job['config']['rss_limit_mb']} MB"
        elif out.violation:
            result.status = Status.CRASHED
            result.error = f"the candidate broke the harness protocol: {out.violation}"
        elif out.error is not None:
            e = out.error
            result.status = classify_error(e["stage"], e["type"], e["message"], e["traceback"],
                                           cpu_mode=cpu_mode, source=source)
            text = e["traceback"] if e["stage"] not in ("signature", "no_modelnew") else e["message"]
            result.error = trim_tail(text or f"{e['type']}: {e['message']}", out.solution_path)
        elif failed is not None:
            result.status = Status.INCORRECT
            result.error = f"trial {failed.trial} ({failed.size} size, seed {failed.seed}): {failed.message}"
        elif out.died or out.done is None:
            result.status, message = classify_exit(out.returncode, out.log_tail)
            tail = trim_tail(out.log_tail, out.solution_path)
            result.error = f"{message}\n{tail}".strip()
        elif len(result.trials) == len(job["trials"]):
            result.status = Status.CORRECT
        else:
            result.status = Status.CRASHED
            result.error = "the candidate finished without running every trial"

    def _kernels(self, result: EvalResult, out: SessionOutcome) -> None:
        report = ((out.done or {}).get("reports") or {}).get("launches") or {}
        for k in report.get("kernels") or []:
            try:
                result.kernels.append(KernelStat(name=str(k["name"])[:200], own=bool(k["own"]),
                                                 launches=int(k["launches"])))
            except (KeyError, TypeError, ValueError):
                continue

    def _timing(self, result: EvalResult, out: SessionOutcome, rt: DeviceRuntime, job: dict[str, Any],
                cfg: EvalConfig, stages: dict[str, float]) -> None:
        if not rt.is_cuda:
            result.timing_note = CPU_TIMING_NOTE
            return
        if not cfg.timing:
            result.timing_note = "not timed: timing is off in the config"
            return
        if result.status is not Status.CORRECT:
            result.timing_note = "not timed: the solution is not correct"
            return
        if out.sol_timing is None:
            result.timing_note = "not timed: the candidate reported no valid timings"
            return
        result.sol_timing = TimingStats(**out.sol_timing)
        stats, result.reference_cached = self._reference_timing(rt, job["trials"][0]["code"], job["reference_seed"],
                                                                result.versions, cfg, stages)
        result.ref_timing = TimingStats(**stats)
        if result.sol_timing.median_ms > 0:
            result.speedup = result.ref_timing.median_ms / result.sol_timing.median_ms
        if out.sol_wall_s is not None:
            result.timing_note = (f"solution timed region took {out.sol_wall_s:.3f} s wall "
                                  f"(measured by the orchestrator)")

    def _reference_timing(self, rt: DeviceRuntime, code: str, seed: int, versions: dict[str, str],
                          cfg: EvalConfig, stages: dict[str, float]) -> tuple[dict[str, Any], bool]:
        """The reference's timing stats for ``code`` (seed: public, so the reference never sees the
        candidate's secret timing inputs) and whether they came from the cache. Timed once per key:
        concurrent evaluations of one problem wait for the first one's timing instead of each timing
        it again (measured: 39 problems timed 257 s in a sustained run, most of them several times)."""
        key = reference_key(code, seed, seed, rt.device_name, versions, cfg.to_dict())
        if not self.cache_reference_timings:
            return self._time_reference(rt, code, seed, cfg, stages), False
        with self.ref_cache.timing(key) as cached:
            if cached is not None:
                return cached, True
            stats = self._time_reference(rt, code, seed, cfg, stages)
            self.ref_cache.put(key, stats)
            return stats, False

    def _time_reference(self, rt: DeviceRuntime, code: str, seed: int, cfg: EvalConfig,
                        stages: dict[str, float]) -> dict[str, Any]:
        t = time.monotonic()
        with rt.rw.exclusive(drain=True):  # no candidate in flight: nothing it queued runs inside
            stages["reference_lock_wait"] = time.monotonic() - t
            # the judge gets exactly the fields that key the cache, so the two cannot drift apart
            stats = Timed.from_header(rt.judge_call(
                TimeReference(code, seed, seed, {k: getattr(cfg, k) for k in TIMING_FIELDS}).to_header())).stats
        stages["reference_timing"] = time.monotonic() - t
        return stats

    def warm(self, problems: Sequence[Any], config: EvalConfig | None = None) -> dict[str, float]:
        """Prepare ``problems`` and time their references now, before the evaluations that need them (an
        RL run knows its problems at start: without this, the first evaluation of each problem pays the
        reference's preparation and timing on its critical path, and every candidate on the device
        waits while a reference is timed). Returns seconds per problem key; idempotent (cached)."""
        cfg = config or EvalConfig()
        rt = self._runtime(cfg.device)
        versions = dict(rt.hello.get("versions", {}))
        spent: dict[str, float] = {}
        for problem in problems:
            t = time.monotonic()
            prepared = rt.prepare(problem, cfg)
            if rt.is_cuda and cfg.timing:
                self._reference_timing(rt, prepared.code, public_seed(cfg.seed), versions, cfg, {})
            spent[problem.key] = time.monotonic() - t
        return spent

    def _done(self, result: EvalResult, stages: dict[str, float], t0: float) -> EvalResult:
        result.stage_seconds = {k: round(v, 6) for k, v in stages.items()}
        result.elapsed_s = time.monotonic() - t0
        return result.finalize()


def _announce(request: EvalRequest, stage: str) -> None:
    """Log the stage an evaluation enters (DEBUG on ``STAGE_LOGGER``).

    `drkernel gym eval` shows these lines while it runs, so a person waiting on a slow reference or a
    candidate near its time limit sees where the time goes. DEBUG on a logger of their own, so a
    service or a trainer logging ``drkernel`` at INFO does not get four lines per evaluation.
    """
    stage_log.debug("%s: %s", request.request_id or request.problem.key, stage)
