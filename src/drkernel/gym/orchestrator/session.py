"""One candidate's run, seen from the orchestrator: hand it the job, relay its exported outputs to
the judge, grant the exclusive timing region, enforce the wall-clock and memory limits, and
collect what happened. Nothing the candidate sends is unpickled; headers are validated JSON.

Solution code runs in the candidate's process, so it can find the channel (a socket among its own
descriptors) and write messages of its own. The orchestrator therefore takes nothing on the
candidate's word that it can establish itself: every comparison is the judge's; messages must
come in the protocol's order (`ProtocolOrder`: the trials in order, each integrity tag judged
once, one report per hook, the timed region only after them, ``done`` last), and anything else
is a protocol violation (a crash, never valid); the final report's claims are cross-checked
against the source (`forged_claims`).

The messages and their sequence (the candidate's side included) are in `drkernel.gym.messages`.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from drkernel.gym.compile_cache import scope_key
from drkernel.gym.ipc import CANDIDATE_HEADER, ChannelClosed, ChannelTimeout, ProtocolViolation, close_fds
from drkernel.gym.messages import (Compare, CompareRequest, Done, Error, Extra, Message, NativeBuild, Op,
                                   Outputs, Release, Signal, SolutionPath, Timing, Verdict, parse_candidate)
from drkernel.gym.orchestrator.memory import RssWatch, group_memory_bytes
from drkernel.gym.verdict.plausibility import suspicious, tree_bytes
from drkernel.gym.orchestrator.runtime import DeviceRuntime
from drkernel.gym.orchestrator.static_child import defined_functions

log = logging.getLogger(__name__)
KILL_GRACE_S = 2.0
EXIT_POLL_S = 0.01


@dataclass
class SessionOutcome:
    trials: list[dict[str, Any]] = field(default_factory=list)   # judge verdicts, in trial order
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)  # tag -> judge verdict
    error: dict[str, Any] | None = None         # the candidate's error report
    done: dict[str, Any] | None = None          # the candidate's final report
    hook_extra: dict[str, Any] = field(default_factory=dict)  # hook name -> extra_runs result (claims)
    sol_timing: dict[str, Any] | None = None    # claimed by the candidate
    sol_timing_sync: dict[str, Any] | None = None  # the re-measurement asked for by `plausibility`
    sol_wall_s: float | None = None             # measured here around the timed region
    out_bytes: int = 0                          # of the first trial's outputs, from their encoded tree
    timed_out: bool = False
    died: bool = False
    oom: bool = False
    violation: str | None = None
    ipc_fallback: str | None = None             # why outputs went as host bytes instead of CUDA IPC
    returncode: int | None = None
    log_tail: str = ""
    solution_path: str | None = None
    child_start_s: float | None = None
    child_wait_s: float = 0.0
    lock_wait_s: float = 0.0
    compile_seeded: int = 0
    """Files of earlier candidates' compiled kernels written into this candidate's cache."""
    compile_stored: int = 0
    """Bytes of this candidate's compiled kernels kept for later candidates of its scope."""
    exclusive_s: float = 0.0
    """Seconds the candidate held the device exclusively (its timed region, the re-measurement
    included): every other candidate on the device waited meanwhile."""
    judge_s: float = 0.0
    """Seconds the candidate's exports waited for the judge's verdicts (queue and comparison)."""
    wall_s: float = 0.0
    exit_s: float = 0.0                         # the candidate's exit, after its last message
    release_s: float = 0.0                      # the judge freeing the job's tensors


class Phase(enum.Enum):
    START = "start"        # before the harness named the solution file
    TRIALS = "trials"      # correctness trials, in order
    EXTRAS = "extras"      # every trial passed: the hooks' extra runs
    TIMING = "timing"      # the hooks are done; the timed region may start (GPU)
    SAMPLES = "samples"    # the timed region is over: its sampled outputs
    ENDED = "ended"        # an error was reported or a trial failed: only ``done`` may follow


class ProtocolOrder:
    """The candidate's message order (`drkernel.gym.messages`); `check` raises `ProtocolViolation` on any
    message out of it. What the candidate could forge in order is caught by `forged_claims` and
    by the verdict checks, which read only the judge's comparisons."""

    def __init__(self, trials: int, hooks: int, timing: bool) -> None:
        self.trials, self.hooks, self.timing = trials, hooks, timing
        self.phase = Phase.START
        self.next_trial = 0
        self.extras_seen = 0
        self.tags: set[str] = set()

    def check(self, op: Op, trial: Any = None) -> None:
        """``trial``: of an ``outputs`` or ``compare`` message."""
        p = self.phase
        if op is Op.ERROR:
            self.phase = Phase.ENDED
        elif op is Op.DONE:
            finished = p is Phase.ENDED or p is Phase.SAMPLES or (p is Phase.TIMING and not self.timing)
            if not finished:
                raise ProtocolViolation(f"done out of order (during {p.value}: {self.next_trial} of "
                                        f"{self.trials} trials, {self.extras_seen} of {self.hooks} hook reports)")
        elif p is Phase.ENDED:
            raise ProtocolViolation(f"{op.value!r} after the run ended (an error or a failed trial)")
        elif op is Op.SOLUTION_PATH:
            self._expect(p is Phase.START, op.value)
            self.phase = Phase.TRIALS
        elif op is Op.OUTPUTS:
            self._expect(p is Phase.TRIALS, op.value)
            if trial != self.next_trial:
                raise ProtocolViolation(f"outputs of trial {trial!r} when trial {self.next_trial} was due")
        elif op is Op.COMPARE:
            timed = trial == "timing"
            self._expect(p is (Phase.SAMPLES if timed else Phase.EXTRAS), f"{op.value} of trial {trial!r}")
        elif op is Op.EXTRA:
            self._expect(p is Phase.EXTRAS, op.value)
            self.extras_seen += 1
            if self.extras_seen == self.hooks:
                self.phase = Phase.TIMING
        elif op is Op.LOCK:
            self._expect(p is Phase.TIMING and self.timing, op.value)
        elif op not in (Op.TIMING, Op.TIMING_SYNC, Op.UNLOCK):  # those: checked against the device hold
            raise ProtocolViolation(f"unknown message {op.value!r}")

    def _expect(self, ok: bool, what: str) -> None:
        if not ok:
            raise ProtocolViolation(f"{what} out of order (during {self.phase.value})")

    def judged(self, tag: str | None, passed: bool) -> None:
        """A verdict was recorded: a trial's (``tag`` None) or a tagged run's (each tag once)."""
        if tag is not None:
            if tag in self.tags:
                raise ProtocolViolation(f"a second comparison for {tag!r}")
            self.tags.add(tag)
            return
        if not passed:
            self.phase = Phase.ENDED
            return
        self.next_trial += 1
        if self.next_trial == self.trials:
            self.phase = Phase.EXTRAS if self.hooks else Phase.TIMING

    def timed_region_over(self) -> None:
        self.phase = Phase.SAMPLES


def forged_claims(source: str, done: dict[str, Any], native: tuple[NativeBuild, ...] = (),
                  functions: frozenset[str] | None = None) -> str | None:
    """A final report that claims launches of the solution's own kernels the source cannot have:
    own kernels without any ``jit`` in the source, or named after no function it defines; for a CUDA
    solution (``native``: its builds), own launches of anything but ``<extension>.<function>`` of them.
    ``functions``: the functions the source defines where they were read already (the evaluator's
    checker child); None parses ``source`` here."""
    reports = done.get("reports") if isinstance(done.get("reports"), dict) else {}
    launches = reports.get("launches") if isinstance(reports.get("launches"), dict) else {}
    kernels = launches.get("kernels") if isinstance(launches.get("kernels"), list) else []
    own = [str(k.get("name", "")) for k in kernels if isinstance(k, dict) and k.get("own")]
    if not own:
        return None
    if native:
        exported = {f"{b.name}.{f}" for b in native for f in b.functions}
        missing = [n for n in own if n not in exported]
        return f"the report claims own launches {missing[:4]} its extensions do not export" if missing else None
    defined = functions if functions is not None else defined_functions(source)
    if "jit" not in source:
        return f"the report claims launches of own kernels {own[:4]} but the source uses no triton.jit"
    missing = [n for n in own if n.rsplit(".", 1)[-1] not in defined]
    if missing:
        return f"the report claims own kernels {missing[:4]} that the source does not define"
    return None


class CandidateSession:
    def __init__(self, runtime: DeviceRuntime, job: dict[str, Any], job_id: str, profile: str,
                 weight_seed: int, timeout_s: float, rss_limit_bytes: int, judge: Any = None,
                 native_blob: bytes = b"", functions: frozenset[str] | None = None) -> None:
        self.rt = runtime
        self.job = job
        self.native = tuple(NativeBuild.from_header(b) for b in job.get("native") or ())  # a CUDA solution's builds
        self.native_blob = native_blob  # their libraries, in order: the head of the job's blob
        self.functions = functions  # the functions the source defines, as the checker child read them
        self.job_id = job_id
        self.profile = profile
        self.weight_seed = weight_seed
        self.timeout_s = timeout_s
        self.rss_limit = rss_limit_bytes
        self.out = SessionOutcome()
        self.hold: str | None = None  # shared, exclusive, None
        self.order = ProtocolOrder(len(job["trials"]), len(job.get("hooks") or ()), bool(job.get("timing")))
        self.child: Any = None
        self.judge: Any = None  # the runtime's JudgeSlot this job sticks to (its reference outputs live there)
        self.own_judge = judge  # a judge of the job's own (a request's reference: `own_judge.OwnJudge`)
        self.compile_scope: str | None = None  # the compile cache's scope of this evaluation, when on
        self.lock_t = 0.0  # when the exclusive region was granted
        self.cancelled = False
        self._cancel_lock = threading.Lock()

    def run(self) -> SessionOutcome:
        if self.own_judge is not None:
            self.judge = self.own_judge
            return self._run()
        with self.rt.judge_for_job() as self.judge:
            return self._run()

    def _run(self) -> SessionOutcome:
        t = time.monotonic()
        assert self.rt.pool is not None
        child = self.rt.pool.take()
        with self._cancel_lock:  # a cancel that came while we waited for a child kills it now
            self.child, cancelled = child, self.cancelled
        if cancelled:
            child.kill()
        self.out.child_wait_s = time.monotonic() - t
        self.out.child_start_s = child.start_s
        started = time.monotonic()
        # the solution file lives in the child's private dir (its own tmpfs under the sandbox)
        self.job = {**self.job, "workdir": os.path.join(child.private_dir, "solution")}
        try:
            self.rt.rw.join()
        except BaseException:  # cancelled while it waited (`WaitCancelled`): the unused child goes too
            child.discard()
            raise
        self.hold = "shared"
        try:
            with RssWatch(child.pid, self.rss_limit, cpu_share=not self.rt.is_cuda) as watch:
                self._converse(child, started)
            self.out.oom = watch.fired
        finally:
            # The candidate's exit (its CUDA context torn down) and the judge freeing the job's tensors
            # still hold the device (shared, or exclusive when a timed region broke off), so neither
            # overlaps another candidate's timed region.
            self.out.wall_s = time.monotonic() - started
            t = time.monotonic()
            try:
                self._finish(child)
                self.out.exit_s = time.monotonic() - t
                self.rt.judge_call(Release(self.job_id).to_header(), judge=self.judge)
            finally:
                if self.hold == "exclusive":  # the region broke off: held until the candidate is gone
                    self.out.exclusive_s += time.monotonic() - self.lock_t
                self.rt.rw.leave(exclusive=self.hold == "exclusive")
                self.hold = None
            self.out.release_s = time.monotonic() - t - self.out.exit_s
        return self.out

    def cancel(self) -> None:
        """Kill the candidate now (its job was cancelled), or as soon as `run` has one; `run` then ends
        as a crash at once."""
        with self._cancel_lock:
            self.cancelled, child = True, self.child
        if child is not None:
            child.kill()

    def _blob_room(self, child: Any) -> int:
        """The most bytes a candidate's next message may carry: what its memory limit leaves beside its
        resident size and private tmpfs, halved (this process and the judge each hold a copy), so
        exported outputs count against ``rss_limit_mb`` before either reads them."""
        return (self.rss_limit - group_memory_bytes(child.pid)) // 2

    def _converse(self, child: Any, started: float) -> None:
        deadline = started + self.timeout_s
        self.lock_t = started
        try:
            job, seed = self._job_with_compiled()
            child.send(job, self.native_blob + seed)
            while True:
                # outputs travel in the candidate's staging buffer, or as a blob counted against its limit;
                # its header holds what a candidate's message can (`CANDIDATE_HEADER`), checked before it is read
                raw = child.recv(deadline, max_fds=1, max_blob=lambda: self._blob_room(child),
                                 max_header=CANDIDATE_HEADER)
                try:
                    msg = parse_candidate(raw.header)
                    self.order.check(msg.op, getattr(msg, "trial", None))
                    if isinstance(msg, (Outputs, Compare)):
                        self._relay(child, msg, raw.blob, raw.fds)
                        continue
                    if raw.fds:
                        raise ProtocolViolation(f"a descriptor sent with {msg.op.value!r}")
                finally:
                    close_fds(raw.fds)  # relayed (the judge got its own copy) or refused
                deadline = self._handle(child, msg, deadline)
                if isinstance(msg, Done):
                    self._keep_compiled(msg, raw.blob)
                    return
        except ChannelTimeout:
            self.out.timed_out = True
        except ChannelClosed:
            self.out.died = True
        except ProtocolViolation as e:
            self.out.violation = str(e)

    def _job_with_compiled(self) -> tuple[dict[str, Any], bytes]:
        """The job, and the kernels earlier candidates of its scope compiled (`compile_cache`); the
        scope is kept for `_keep_compiled`."""
        cache = getattr(self.rt, "compile_cache", None)
        if cache is None:
            return self.job, b""
        self.compile_scope = scope_key(str(self.job["solution"]), str(self.job["trials"][0]["code"]),
                                       self.rt.device_name, self.rt.hello.get("versions") or {})
        index, blob = cache.load(self.compile_scope)
        self.out.compile_seeded = len(index)
        return {**self.job, "compile_cache": True, "compile_seed": [list(e) for e in index]}, blob

    def _keep_compiled(self, done: Done, blob: bytes) -> None:
        """Store what the candidate compiled under its scope (untrusted bytes: checked by the cache)."""
        if self.compile_scope is None or not done.compile_files:
            return
        try:
            self.out.compile_stored = self.rt.compile_cache.store(self.compile_scope, done.compile_files, blob)
        except (OSError, ValueError) as e:
            log.warning("compile cache: %s's files not kept: %s", self.job_id, e)

    def _handle(self, child: Any, msg: Message, deadline: float) -> float:
        """One message other than an export; returns the deadline (extended by waits for the device)."""
        if msg.op is Op.LOCK:
            wait = self._switch_stopped(child, "exclusive")
            self.out.lock_wait_s += wait
            self.lock_t = time.monotonic()
            child.send(Signal(Op.LOCKED).to_header())
            return deadline + wait
        if msg.op in (Op.TIMING, Op.TIMING_SYNC, Op.UNLOCK):
            if self.hold != "exclusive":
                raise ProtocolViolation(f"{msg.op.value} outside the timed region")
            if isinstance(msg, Timing) and msg.op is Op.TIMING:
                self.out.sol_wall_s = time.monotonic() - self.lock_t
                self.out.sol_timing = msg.claimed()
                if self._suspicious():  # the re-measurement runs inside the same region
                    child.send(Signal(Op.REMEASURE).to_header())
                    return deadline
            elif isinstance(msg, Timing):
                self.out.sol_timing_sync = msg.claimed()
            # Back to a shared hold before the candidate goes on (its sampled outputs are copied on the
            # device): it waits for ``continue`` meanwhile, stopped, while other regions run first.
            self.out.exclusive_s += time.monotonic() - self.lock_t
            deadline += self._switch_stopped(child, "shared")
            self.order.timed_region_over()
            if msg.op is not Op.UNLOCK:
                child.send(Signal(Op.CONTINUE).to_header())
        elif isinstance(msg, Extra):
            self.out.hook_extra[msg.hook] = msg.result
        elif isinstance(msg, SolutionPath):
            self.out.solution_path = msg.path
        elif isinstance(msg, Error):
            self.out.error = msg.as_dict()
        elif isinstance(msg, Done):
            done = msg.to_header()
            forged = forged_claims(str(self.job.get("solution", "")), done, self.native, self.functions)
            if forged:
                raise ProtocolViolation(f"forged report: {forged}")
            self.out.done = done
        return deadline

    def _relay(self, child: Any, msg: Outputs | Compare, blob: bytes, fds: list[int]) -> None:
        """An export (a trial's outputs, or a hook's tagged outputs) to the judge; its verdict back."""
        tag = msg.tag if isinstance(msg, Compare) else None
        verdict = self._compare(msg, blob, tag, fds)
        if verdict.retry_host:  # the judge could not map the staging buffer
            self.out.ipc_fallback = verdict.message
            child.send(Signal(Op.RETRY_HOST).to_header())
        elif tag is None:
            self.order.judged(None, verdict.passed)
            if not self.out.trials:
                self.out.out_bytes = _output_bytes(msg.tree)
            self.out.trials.append(verdict.record(msg.trial))
            child.send(Verdict(verdict.passed).to_header())
        else:
            self.order.judged(tag, verdict.passed)
            self.out.extra[tag] = verdict.record(msg.trial)
            child.send(verdict.to_header())

    def _suspicious(self) -> bool:
        """Is the claimed solution time below a plausibility bound (`drkernel.gym.verdict.plausibility`)?"""
        if self.out.sol_timing is None:
            return False
        return suspicious(self.out.sol_timing["median_ms"], self.out.out_bytes, self.rt.device_name,
                          self.job.get("roofline_ms"))

    def _compare(self, msg: Outputs | Compare, blob: bytes, tag: str | None, fds: list[int]) -> Verdict:
        trial = msg.trial
        trials = self.job["trials"]
        if trial == "timing" and tag is not None:  # a sampled timed call: the timing inputs' seed
            spec = {"code": trials[0]["code"], "seed": self.job["timing_seed"]}
        elif not isinstance(trial, int) or not 0 <= trial < len(trials):
            raise ProtocolViolation(f"trial index {trial!r}")
        else:
            spec = trials[trial]
        request = CompareRequest(self.job_id, trial, spec["code"], spec["seed"], self.weight_seed, self.profile,
                                 msg.tree, tag, msg.staging if fds else None)
        t = time.monotonic()
        try:
            return Verdict.from_header(self.rt.judge_call(request.to_header(), blob, fds=fds[:1], judge=self.judge))
        finally:
            self.out.judge_s += time.monotonic() - t

    def _switch_stopped(self, child: Any, mode: str) -> float:
        """Into this candidate's timed region (``exclusive``) or back out of it (``shared``), the
        candidate's process tree stopped until the new hold is granted (it waits for our reply, or,
        after ``unlock``, reports its error); returns the seconds that took."""
        t = time.monotonic()
        child.stop()
        try:
            (self.rt.rw.enter_region if mode == "exclusive" else self.rt.rw.leave_region)()
            self.hold = mode
        finally:
            child.resume()
        return time.monotonic() - t

    def _finish(self, child: Any) -> None:
        """Let a finished candidate exit on its own for a moment, then kill its process group. The wait
        holds the device shared, so a timed region that starts waiting cuts it short: a solution that
        keeps its process alive after ``done`` (say, ``os._exit`` replaced) delays no region by
        `KILL_GRACE_S`."""
        if self.out.done is not None or self.out.died:
            grace = time.monotonic() + KILL_GRACE_S
            while not child.wait(EXIT_POLL_S) and time.monotonic() < grace:
                if self.rt.rw.contended:
                    break
        child.kill()
        self.out.returncode = child.returncode
        self.out.log_tail = child.log_tail()
        child.discard()


def _output_bytes(tree: Any) -> int:
    """Bytes of the outputs in a trial's (outputs, inputs) tree."""
    items = tree.get("items") if isinstance(tree, dict) else None
    return tree_bytes(items[0]) if isinstance(items, list) and items else 0

