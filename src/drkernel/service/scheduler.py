"""The scheduler: moves jobs from the store to device workers and results back.

One asyncio task claims queued jobs for each ready worker while it has free slots and its admitted
jobs' estimated device bytes fit its budget; one task per job awaits the worker's answer; one task
renews the leases of jobs in flight and re-queues jobs whose lease lapsed. Outcomes:

* a result (whatever the solution did: correct, incorrect, crashed, timeout) -> ``done``, cached by
  content hash when it is the solution's verdict alone (`solution_verdict`: not a crash, timeout or
  memory exhaustion, which a kill from outside or host load can cause); a client's first crash or
  timeout on a worker also triggers a canary check of its device, its later ones only every
  `ENDS_PER_CHECK` such results;
* our own failure (worker process lost, evaluator raised, worker hung, store error) -> re-queued
  once, ``failed`` with its cause the second time; the worker is restarted and canaried;
* the problem's reference failed (`ReferenceFailed`: a custom reference that raises, say) ->
  ``failed`` at once with error class ``reference_error``: the request's fault, not the device's, so
  neither retried nor canaried;
* preempted (below) -> ``queued`` again with the attempt uncounted, or ``done`` when its result
  arrived before the kill did.

Running jobs are shared fairly too (`fair_share_excess`): when a worker's slots are all taken and a
client with a claimable queued job holds fewer of them than its share, a client holding more than
its share gives back its most recently started job on that worker (the least work lost): its
candidate is killed, the job is queued again, its attempt not counted, and the freed slot goes to
the client running fewest jobs (the store's fair order). A one-slot worker never preempts (two
clients would take the slot from each other forever): there the wait is bounded by the running job's
``timeout_s``. This is the shape of a multi-tenant batch scheduler's fair-share preemption with
requeue (Slurm's ``PreemptMode=REQUEUE``, Kubernetes' priority preemption): a waiting client's wait
for a multi-slot worker is one kill, not another client's longest job.

A job given back ``k`` times is not given back again until its current run has lasted
`protected_s` (``k``): `PROTECT_BASE_S` doubled with each give-back after the first (`pick_preempted`).
So a job that needs ``T`` seconds starts over at most about ``log2(T / PROTECT_BASE_S) + 2`` times
whatever other clients submit: without a bound, a client sending one quick job at a time (1.5 a second,
far under every rate limit) made another client's two 10-s jobs start over 217 times in 150 s, none
finishing (hostile round 12). And no job is exempt for good: with a job given back at most once, two
arrivals exempted both of an attacker's jobs and a third client waited for the attacker's
``timeout_s`` (127 s, an earlier round); here that waiter waits for the shorter of a window and the
job. Of the over-share client's jobs that may be given back, the one given back fewest times goes first,
so the restarts spread over its jobs. A preemption hands a slot to a client that then runs a job of its
own, and a client that cancels a job preempts no one until one of its jobs ends with a result, so
submit-then-cancel cycles cannot make another client's job start over either.

A client's share is also kept for it while it is away for a moment (`reserved_slots`): a client
active on a worker within `ServiceConfig.reserve_s` (a job of its ran or runs there; submitting
renews it) is owed its floor of the slots there, and a client at or over its own share does not
claim a slot owed to another (`JobStore.claim`). Without it, each time a client sending one job at a
time had its job end, its slot went to another client's queued job and its next job preempted that
one, whose protected window doubled with each give-back: the client's waits grew 4, 29, 58, 118,
238 s (hostile round 14). Now its next job finds its slot free. What it costs: a slot stays idle
only while a client active within ``reserve_s`` is below its share, on the one worker it last used;
a lone client (nobody else active) is never held back, and a client reserves no more than its own
share (a one-slot worker, whose share among two clients is half a slot, reserves nothing). A client
away longer than ``reserve_s`` takes its slot back by preemption, as before.

After a worker is lost, the jobs it held run again (`JobStore.claim`) alone on an idle worker, so a
job that brings the worker down again takes no innocent neighbour with it, but only for their first
`RETRY_ALONE_S`: past it the worker takes other clients' jobs beside the retry (and fair share
applies to it), so a retry with a long ``timeout_s`` (a busy loop, a job that was beside a worker
loss by chance) cannot hold the whole worker for its timeout (hostile round 12: another client's
0.5-s job waited 61 s behind two such retries). A retry that kills the worker after that window
costs each neighbour a run and one of its ``max_attempts`` (it runs again, alone).

Jobs are keyed (for the result cache and for coalescing duplicates) by `request_key`: the problem as
the judge runs it (code, level, dtype, CPU overrides, metadata), the solution, the config and the
device model.

Standard library only (no web stack): the GPU throughput benchmark drives it directly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Awaitable, Callable, Sequence

from drkernel.errors import InfrastructureError
from drkernel.gym.config import EvalRequest
from drkernel.gym.result import EvalResult, Status
from drkernel.service.admission import estimate_device_bytes
from drkernel.service.canary import canary_passed, canary_request
from drkernel.service.config import ServiceConfig
from drkernel.service.metrics import ServiceMetrics
from drkernel.service.store import Cancel, Job, JobStatus, JobStore, NewJob, Quota, StoreError
from drkernel.service.workers import ReferenceFailed, WorkerHandle, WorkerUnavailable

log = logging.getLogger(__name__)

START_ATTEMPTS = 3
WATCH_EVERY_S = 1.0
_PROBLEM_IDENTITY = ("name", "source", "problem_id")  # names only: they do not change an evaluation


def request_key(request: EvalRequest, device_name: str = "") -> str:
    """The key of a request's evaluation on a device model: `EvalRequest.content_hash` and every
    field of the problem that the judge or the verdict reads (its dtype, for one); the problem's
    names are left out, so one reference under two names shares its results."""
    problem = {k: v for k, v in request.problem.to_dict().items() if k not in _PROBLEM_IDENTITY}
    h = hashlib.sha256(request.content_hash(device_name).encode())
    h.update(json.dumps(problem, sort_keys=True, default=str).encode())
    return h.hexdigest()


def fair_share(slots: int, n: int) -> tuple[int, int]:
    """A client's share of a worker's ``slots`` among ``n`` clients, ``slots / n``, in whole slots: the
    least it is sure of (the floor) and the most it may keep while another wants its own (the
    ceiling). Worked cases: 2 slots, 2 clients -> (1, 1); 3 slots, 2 -> (1, 2); 2 slots, 3 -> (0, 1);
    1 slot, 2 -> (0, 1)."""
    return slots // n, -(-slots // n)


def fair_share_excess(slots: int, running: dict[str, int], waiting: set[str]) -> str | None:
    """The client that should give a slot back on a full worker, or None.

    With ``n`` clients sharing the worker (those running on it and those with claimable queued jobs),
    a client's share is `fair_share`: one holding more than its ceiling gives a slot back while a
    waiting client holds fewer than its floor (at least 1: one holding none). Worked cases:
    2 slots, A runs 2, B waits -> A (then 1 and 1: nobody). 3 slots, A 3, B waits -> A (then A 2,
    B 1: nobody). 2 slots, A 2, B and C wait -> A (then A 1, B 1, C waits: nobody over 1).
    1 slot -> never; nobody waiting (a full worker whose jobs were all cancelled) -> nobody."""
    if slots < 2 or not waiting:
        return None
    low, high = fair_share(slots, len(set(running) | waiting))
    low = max(1, low)
    if not any(running.get(c, 0) < low for c in waiting):
        return None
    over = [c for c, k in running.items() if k > high]
    return max(over, key=lambda c: (running[c], c)) if over else None


def reserved_slots(slots: int, running: dict[str, int], recent: set[str], waiting: set[str]) -> dict[str, int]:
    """The slots of a worker kept for clients below their share (client -> slots; `JobStore.claim`
    gives another client's job only a slot beyond them), or {} when no recently active client is owed
    one: then claims go as before, in the fair order alone.

    ``running``: jobs in flight on the worker by client; ``recent``: clients active on it within
    ``reserve_s`` (one running there, or one whose last job ran there: `Scheduler._recent_on`);
    ``waiting``: clients with a claimable queued job. All of them are the ``n`` clients of
    `fair_share`, and each client among ``recent`` or ``waiting`` is owed its floor less what it runs.
    Worked cases: 2 slots, mallory runs 1 and waits, alice's job just ended -> {alice: 1} (mallory's
    queued job does not take alice's slot). Alice alone, her job just ended -> {alice: 2} (nobody is
    held back). 1 slot -> {} (a share of half a slot keeps nothing). 2 slots, mallory 1, alice recent,
    carol waits -> {} (a floor of 0). 4 slots, mallory 3, alice recent with 1 -> {alice: 1}. 2 slots,
    alice 1, mallory 1 and waits -> {} (alice holds her share). 3 slots, alice recent, mallory 2 and
    waits, bob waits -> {alice: 1, bob: 1} (bob's own slot is kept too, as alice's must not block it)."""
    n = len(set(running) | recent | waiting)
    floor = fair_share(slots, n)[0] if n else 0
    owed = {c: floor - running.get(c, 0) for c in recent | waiting if running.get(c, 0) < floor}
    return owed if owed.keys() & recent else {}


def pick_preempted(jobs: Sequence[Job], given_back: dict[str, int], now: float | None = None) -> Job | None:
    """Which of an over-share client's running ``jobs`` on a worker to give back, or None: of those
    whose current run has lasted their `protected_s` (``given_back``: job id -> times given back so
    far; ``now`` on the store's clock, the wall clock), the one given back fewest times, then the latest
    started (the least work lost). Worked cases (base 30 s, now 100): A1 started at 1, A2 at 2, none
    given back -> A2. A2 once, A1 never -> A1. A1 once started at 95, A2 once at 97 -> None (both in
    their first window); A1 at 65 -> A1. Given back twice, started at 85 -> None (its window is 60 s)."""
    now = time.time() if now is None else now
    candidates = [j for j in jobs if now - (j.started or now) >= protected_s(given_back.get(j.id, 0))]
    return min(candidates, key=lambda j: (given_back.get(j.id, 0), -(j.started or 0.0), j.id), default=None)


def protected_s(times_given_back: int) -> float:
    """How long a job's run must last before it may be given back again: 0 before its first give-back,
    then `PROTECT_BASE_S` doubled with each further one (capped at a day: the window only grows)."""
    if times_given_back <= 0:
        return 0.0
    return PROTECT_BASE_S * 2.0 ** min(times_given_back - 1, 13)


PROTECT_BASE_S = 30.0
"""A job's run after its first give-back is protected this long (`protected_s`)."""

RETRY_ALONE_S = 15.0
"""How long a retry (a job that was in flight when its worker was lost) runs alone on its worker
before the worker takes other jobs beside it: a job that brings a worker down mostly does so early
(an allocation, a launch), and the bound keeps one client's retries from holding a whole worker for
their ``timeout_s`` (`Scheduler._alone`)."""

LOOP_RESTART_S = 0.5
"""Pause before a scheduler loop that raised starts again (`Scheduler._supervised`)."""

MAX_REMEMBERED_CLIENTS = 65536
"""Clients whose last activity is remembered (for `reserved_slots`); past it, the least recently
active is forgotten (its reservation lapses early)."""

MAX_REMEMBERED_PREEMPTIONS = 65536
"""Preempted jobs whose count of preemptions is remembered until they finish; past it, the oldest is
forgotten (its next window is then `PROTECT_BASE_S` again)."""

ENDS_PER_CHECK = 16
"""Crash and timeout results on a worker after which it is canaried again, whoever's they are."""

STOP_PATIENCE_S = 15.0
"""How long a job past its deadline has to end once stopped alone before its worker is killed."""
ENDED_BY_THE_HOST = frozenset({Status.CRASHED, Status.TIMEOUT, Status.OUT_OF_MEMORY})
"""Ends that something besides the solution can cause: a kill from outside (the OOM killer, an
operator: SIGKILL reads as a crash), a wall clock slowed by host load, a device another job filled."""


def solution_verdict(result: EvalResult) -> bool:
    """Whether ``result`` is a property of (solution, problem, config) alone, so that it may serve
    every client: cached, and handed to queued duplicates. The ends in `ENDED_BY_THE_HOST` are not:
    the same request runs again next time (at its own client's cost)."""
    return result.status not in ENDED_BY_THE_HOST


def _killed(answer: str) -> bool:
    """Whether a result is a candidate's crash (what a kill of a preempted job ends in); an unreadable
    answer counts as one (the job is run again rather than failed)."""
    try:
        return EvalResult.from_json(answer).status is Status.CRASHED
    except (ValueError, KeyError, TypeError):
        return True


class WorkerState(str, Enum):
    STARTING = "starting"
    READY = "ready"
    CHECKING = "checking"  # running a canary; takes no new jobs meanwhile
    RESTARTING = "restarting"
    OUT_OF_SERVICE = "out_of_service"
    STOPPED = "stopped"


@dataclass
class Worker:
    """The scheduler's book on one device worker."""

    handle: WorkerHandle
    state: WorkerState = WorkerState.STARTING
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)
    budget_bytes: int = 0
    used_bytes: int = 0
    in_flight: dict[str, Job] = field(default_factory=dict)
    deadlines: dict[str, float] = field(default_factory=dict)  # job id -> monotonic watchdog deadline
    cancelled: set[str] = field(default_factory=set)  # in flight, cancelled: their candidate was killed
    preempted: set[str] = field(default_factory=set)  # in flight, being given back to the queue
    overdue: set[str] = field(default_factory=set)  # in flight past their deadline, being stopped
    collateral: set[str] = field(default_factory=set)  # in flight on a worker killed for another job
    cleared: set[str] = field(default_factory=set)  # clients whose crash or timeout a passed canary followed
    ends_since_check: int = 0  # crash and timeout results since the last canary
    completed: int = 0
    infra_failures: int = 0
    restarts: int = 0

    @property
    def device_name(self) -> str:
        return str(self.info.get("device_name", self.handle.device))

    def view(self) -> dict[str, Any]:
        return {
            "name": self.handle.name,
            "device": self.handle.device,
            "device_name": self.device_name,
            "state": self.state.value,
            "reason": self.reason,
            "slots": self.handle.slots,
            "in_flight": len(self.in_flight),
            "used_bytes": self.used_bytes,
            "budget_bytes": self.budget_bytes,
            "slot_memory_bytes": self.info.get("slot_memory_bytes"),
            "completed": self.completed,
            "infra_failures": self.infra_failures,
            "restarts": self.restarts,
            **self.handle.describe(),
        }


@dataclass(frozen=True)
class Submission:
    request: EvalRequest
    idempotency_key: str | None = None
    priority: int = 0
    client: str = ""


class Scheduler:
    def __init__(
        self,
        store: JobStore,
        handles: Sequence[WorkerHandle],
        config: ServiceConfig,
        metrics: ServiceMetrics | None = None,
    ):
        self.store, self.config = store, config
        self.metrics = metrics or ServiceMetrics()
        self.workers = [Worker(h) for h in handles]
        self._wake = asyncio.Event()
        self._waiters: dict[str, set[asyncio.Future]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False
        self.loop_restarts = 0  # times a scheduler loop raised and was started again (`_supervised`)
        self._preempted: OrderedDict[str, int] = OrderedDict()  # job -> times given back (`pick_preempted`)
        self._cancelled_since_result: set[str] = set()  # clients who preempt no one until a result
        self._active: OrderedDict[str, tuple[float, str]] = OrderedDict()  # client -> (monotonic, worker)

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Re-queue what a previous server left running, start the workers, start the loops."""
        recovered = self.store.recover()
        if recovered:
            log.warning("re-queued %d job(s) left running by a previous server", len(recovered))
            self.metrics.errors.inc(len(recovered), error_class="server_restart")
        await asyncio.gather(*(self._bring_up(w) for w in self.workers))
        for loop in (self._dispatch_loop, self._lease_loop, self._watch_loop):
            self._spawn(self._supervised(loop))

    async def stop(self) -> None:
        self._stopping = True
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        claims = [(j.id, j.claim) for w in self.workers for j in w.in_flight.values()]
        try:
            self.store.release(claims)
        except StoreError as e:
            log.error(
                "could not release %d claim(s) at shutdown (the next start re-queues them): %s",
                len(claims),
                e,
            )
        await asyncio.gather(*(w.handle.stop() for w in self.workers), return_exceptions=True)
        for w in self.workers:
            w.state = WorkerState.STOPPED

    async def _supervised(self, loop: Callable[[], Awaitable[None]]) -> None:
        """Run one of the scheduler's loops for the server's life: an exception it did not expect is
        logged and counted (``error_class="scheduler_loop"``) and the loop starts again, so no bug in
        one tick stops dispatch for every client while health still answers ok."""
        while not self._stopping:
            try:
                await loop()
                return
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the loop goes on; the traceback is in the log
                log.exception("scheduler loop %s failed; restarting it", loop.__name__)
                self.metrics.errors.inc(error_class="scheduler_loop")
                self.loop_restarts += 1
                await asyncio.sleep(LOOP_RESTART_S)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def wake(self) -> None:
        self._wake.set()

    # -- submission and waiting ---------------------------------------------------------------

    def devices(self) -> list[str]:
        """Devices the workers run (``cpu``, ``cuda:0``, ...): what a request may name."""
        return [w.handle.device for w in self.workers]

    def device_models(self) -> list[str]:
        return sorted({w.device_name for w in self.workers if w.info})

    def cache_keys(self, request: EvalRequest) -> tuple[str, ...]:
        if not self.config.cache:
            return ()
        return tuple(request_key(request, m) for m in self.device_models())

    def submit(self, items: Sequence[Submission], quota: Quota | None = None) -> list[tuple[Job, bool]]:
        """Store jobs (durably, before returning); cached ones are done at once. On the event loop:
        the app runs `new_jobs` and the store in a thread, then `accepted` here."""
        jobs = self.new_jobs(items)
        self.store.precheck(jobs, quota)
        out = self.store.submit([self.estimated(j, s.request) for j, s in zip(jobs, items)], quota)
        self.accepted(out)
        return out

    def new_jobs(self, items: Sequence[Submission]) -> list[NewJob]:
        """The store's records of ``items``, serialised and hashed but not yet estimated (no code is
        read: `estimated` does it once the store's cheap refusals passed, `JobStore.precheck`); any
        thread."""
        return [
            NewJob(
                request_json=json.dumps(s.request.to_dict()),
                req_hash=request_key(s.request),
                est_bytes=0,
                cache_keys=self.cache_keys(s.request),
                request_id=s.request.request_id,
                idem_key=s.idempotency_key,
                priority=s.priority,
                client=s.client,
                problem_key=s.request.problem.key,
            )
            for s in items
        ]

    def estimated(self, job: NewJob, request: EvalRequest) -> NewJob:
        """``job`` with its estimated device bytes on the workers' devices (`admission.Unreadable` for
        code too deep to read)."""
        return replace(job, est_bytes=estimate_device_bytes(request, self.devices()))

    def accepted(self, out: Sequence[tuple[Job, bool]]) -> None:
        """Count stored jobs, answer waiters of the cached ones, wake the dispatcher (event loop). Only a
        created job that queues renews its client's reservation (`_touch`): a cache hit or a repeated
        idempotency key runs nothing (hostile round 15, A01: cached re-submissions every 15 s kept a slot
        idle past ``reserve_s``, both slots busy 0 % of a batch instead of 96 %)."""
        created = [job for job, is_new in out if is_new]
        self.metrics.submitted.inc(len(created))
        for job in created:
            if job.status is JobStatus.QUEUED:
                self._touch(job.client)
        hits = [job for job in created if job.status is JobStatus.DONE]
        if hits:
            self.metrics.cache_hits.inc(len(hits), kind="submit")
            self._notify(hits)
        self.wake()

    async def cancel(self, job_id: str, client: str | None = None) -> Job | None:
        """Cancel a job of ``client`` (None: any); a running one has its candidate killed.

        The store's write runs in a thread: it waits for the store's write lock (a batch submit's
        transaction, say) without holding the event loop. What follows it (`_after_cancel`) runs on
        the loop as soon as the write is done, even when the caller is no longer waiting for it."""
        stored = asyncio.ensure_future(asyncio.to_thread(self.store.cancel, job_id, client))
        stored.add_done_callback(self._after_cancel)
        return (await asyncio.shield(stored)).job

    def _after_cancel(self, stored: asyncio.Future) -> None:
        """A cancel reached the store: kill the job's candidate where it is in flight, count the job
        finished and wake its waiters, once, by the cancel that made the change. A job claimed in
        the meantime but not yet in flight here is killed by the lease loop (`_drop_lost`: its claim
        is gone); one that ended first, or was cancelled before, is left alone."""
        if stored.cancelled() or stored.exception() is not None:
            return
        outcome: Cancel = stored.result()
        job = outcome.job
        if job is None or not outcome.now:
            return
        self._cancelled_since_result.add(job.client)
        for w in self.workers:
            if job.id in w.in_flight and job.id not in w.cancelled:
                w.cancelled.add(job.id)
                self._spawn(self._cancel_running(w, job.id))
        self._notify([job])

    async def _cancel_running(self, w: Worker, job_id: str) -> None:
        try:
            await w.handle.cancel(job_id)
        except Exception as e:  # noqa: BLE001 - the watchdog still bounds the job's slot
            log.warning("cancelling %s on %s failed: %s", job_id, w.handle.name, e)

    async def wait(self, ids: Sequence[str], timeout: float, client: str) -> dict[str, Job]:
        """Jobs of ``client`` by id once all are terminal or ``timeout`` passed (unknown ids, and
        those of other clients, are left out)."""
        return await asyncio.to_thread(self.store.get_many, await self.wait_ids(ids, timeout, client), client)

    async def wait_ids(self, ids: Sequence[str], timeout: float, client: str) -> list[str]:
        """`wait` without its final read: the ids of ``client``'s jobs among ``ids``, returned once all
        are terminal or ``timeout`` passed (the app reads them against the client's answer budget).
        Ownership is read first, without loading requests or results: only the client's own
        unfinished jobs get a waiter, one future each."""
        ids = list(dict.fromkeys(ids))
        states = await asyncio.to_thread(self.store.states, ids, client)
        pending = [i for i, s in states.items() if not s.terminal]
        if pending and timeout > 0:
            loop = asyncio.get_running_loop()
            futs = {i: loop.create_future() for i in pending}
            for i, f in futs.items():
                self._waiters.setdefault(i, set()).add(f)
            try:
                # a job that finished before its waiter was registered: read again after registering
                again = await asyncio.to_thread(self.store.states, pending, client)
                left = [futs[i] for i, s in again.items() if not s.terminal]
                if left:
                    await asyncio.wait(left, timeout=timeout)
            finally:
                for i, f in futs.items():
                    waiting = self._waiters.get(i)
                    if waiting is not None:
                        waiting.discard(f)
                        if not waiting:
                            del self._waiters[i]
        return list(states)

    def _notify(self, jobs: Sequence[Job]) -> None:
        """``jobs`` (as the caller holds them) reached a terminal state: count them, wake their waiters."""
        self._count_ends([(j.status.value, j.created, j.finished) for j in jobs])
        self._wake_waiters([j.id for j in jobs])

    async def _notify_stored(self, ids: Sequence[str]) -> None:
        """`_notify` for jobs known by id: their status and times are read in a thread, without their
        requests or results (a result and its 4,096 coalesced duplicates, say), never on the event loop."""
        if not ids:
            return
        try:
            self._count_ends(await asyncio.to_thread(self.store.ends, list(ids)))
        except StoreError as e:
            log.error("metrics for finished jobs skipped: %s", e)
        self._wake_waiters(ids)

    def _count_ends(self, ends: Sequence[tuple[str, float, float | None]]) -> None:
        for status, created, finished in ends:
            self.metrics.finished.inc(outcome=status)
            if finished is not None:
                self.metrics.job_latency.observe(max(0.0, finished - created))

    def _wake_waiters(self, ids: Sequence[str]) -> None:
        for i in ids:
            for f in self._waiters.get(i, ()):
                if not f.done():
                    f.set_result(None)

    # -- workers ------------------------------------------------------------------------------

    async def _bring_up(self, w: Worker, restart: bool = False) -> None:
        """(Re)start a worker, then canary it; on repeated failure it leaves service."""
        w.state = WorkerState.RESTARTING if restart else WorkerState.STARTING
        error = ""
        for attempt in range(START_ATTEMPTS):
            if restart or attempt:
                w.handle.kill()
                await w.handle.stop()
                w.restarts += 1
            try:
                w.info = await w.handle.start()
                break
            except InfrastructureError as e:
                error = str(e)
                log.warning("worker %s failed to start (attempt %d): %s", w.handle.name, attempt + 1, e)
                await asyncio.sleep(min(2.0**attempt, 10.0))
        else:
            self._out_of_service(w, f"failed to start {START_ATTEMPTS} times: {error}")
            return
        w.budget_bytes = self.config.device_memory_bytes or int(0.9 * int(w.info["memory_bytes"]))
        if self.config.canary:
            ok, reason = await self._canary(w)
            if not ok:
                self._out_of_service(w, reason)
                return
        w.state, w.reason = WorkerState.READY, ""
        log.info("worker %s ready on %s (%s)", w.handle.name, w.handle.device, w.device_name)
        self.wake()

    async def _canary(self, w: Worker) -> tuple[bool, str]:
        request = canary_request()
        try:
            answer = await asyncio.wait_for(
                w.handle.evaluate(json.dumps(request.to_dict())),
                request.config.timeout_s + self.config.job_timeout_grace_s,
            )
            ok, reason = canary_passed(EvalResult.from_json(answer))
        except (InfrastructureError, asyncio.TimeoutError, ValueError, KeyError) as e:
            ok, reason = False, f"canary evaluation failed: {type(e).__name__}: {e}"
        self.metrics.canary.inc(outcome="passed" if ok else "failed")
        return ok, reason

    def _out_of_service(self, w: Worker, reason: str) -> None:
        w.state, w.reason = WorkerState.OUT_OF_SERVICE, reason
        log.error("device %s (%s) leaves service: %s", w.handle.device, w.handle.name, reason)

    def _begin_check(self, w: Worker, why: str, restart: bool = False, client: str | None = None) -> None:
        """After a crash, timeout or infrastructure failure on ``w``: stop giving it jobs at once,
        then restart it (``restart``, or its process is gone) or canary it in place. A passed
        canary clears ``client``'s bad ends (`_after_bad_end`)."""
        if w.state is not WorkerState.READY or self._stopping:
            return
        w.state = WorkerState.CHECKING
        self._spawn(self._check(w, why, restart, client))

    async def _check(self, w: Worker, why: str, restart: bool, client: str | None = None) -> None:
        if restart or not w.handle.alive:
            log.warning("worker %s lost (%s); restarting", w.handle.name, why)
            await self._bring_up(w, restart=True)
            return
        if self.config.canary:
            ok, reason = await self._canary(w)
            if not ok and not w.handle.alive:  # the process died under the canary: restart it
                await self._bring_up(w, restart=True)
                return
            if not ok:
                self._out_of_service(w, f"{reason} (after: {why})")
                return
        w.ends_since_check = 0
        if client is not None:
            w.cleared.add(client)
        w.state = WorkerState.READY
        self.wake()

    # -- loops --------------------------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            for w in self.workers:
                if w.state is WorkerState.READY and not w.handle.alive:
                    self._begin_check(w, "worker process gone", restart=True)
                    continue
                free = w.handle.slots - len(w.in_flight)
                if w.state is not WorkerState.READY or free <= 0 or self._alone(w):
                    continue
                try:
                    jobs = await self._claim(w, free)
                except StoreError as e:
                    self.metrics.errors.inc(error_class="store_error")
                    log.error("claim failed: %s", e)
                    jobs = []
                for job in jobs:
                    self._touch(job.client, w.handle.name)
                    w.in_flight[job.id] = job
                    w.used_bytes += job.est_bytes
                    self._spawn(self._run(w, job))
            await self._share_slots()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass

    @staticmethod
    def _alone(w: Worker) -> bool:
        """Whether ``w`` runs a retry still in its first `RETRY_ALONE_S` (the store claims a retry
        only for an idle worker): meanwhile the worker takes no other job and gives no slot back."""
        now = time.time()  # the store's clock (a claim's ``started``)
        return any(j.attempts > 1 and now - (j.started or 0.0) < RETRY_ALONE_S for j in w.in_flight.values())

    async def _claim(self, w: Worker, free: int) -> list[Job]:
        """Claim up to ``free`` jobs for ``w`` in a thread (a write transaction never holds the event
        loop); jobs claimed while the dispatcher was being stopped are handed back uncounted."""
        owed = await self._owed(w)
        claim = asyncio.ensure_future(asyncio.to_thread(
            self.store.claim, w.handle.name, free, w.budget_bytes - w.used_bytes, idle=not w.in_flight,
            lease_s=self.config.lease_s, owed=owed))
        try:
            return await asyncio.shield(claim)
        except asyncio.CancelledError:
            jobs = await claim
            self.store.release([(j.id, j.claim) for j in jobs])
            raise

    def _touch(self, client: str, worker: str = "") -> None:
        """``client`` is active now (a job it submitted that queues; a job of its claimed on, or ended on,
        ``worker``; never a cached answer, `accepted`):
        its reservation on the worker it last used runs `ServiceConfig.reserve_s` from now."""
        if self.config.reserve_s <= 0:
            return
        _, last = self._active.pop(client, (0.0, ""))
        self._active[client] = (time.monotonic(), worker or last)
        if len(self._active) > MAX_REMEMBERED_CLIENTS:
            self._active.popitem(last=False)

    def _recent_on(self, w: Worker) -> set[str]:
        """Clients active on ``w`` within ``reserve_s``: those running a job there, and those whose last
        job ran there (a client's reservation is on one worker, not on each); none that cancelled a job
        since its last result (as for preemption: cycles of submit and cancel reserve nothing)."""
        horizon = time.monotonic() - self.config.reserve_s
        while self._active and next(iter(self._active.values()))[0] < horizon:
            self._active.popitem(last=False)  # oldest first: the rest are recent
        recent = {c for c, (_, worker) in self._active.items() if worker == w.handle.name}
        return (recent | set(self._running_on(w))) - self._cancelled_since_result

    @staticmethod
    def _running_on(w: Worker) -> dict[str, int]:
        """Jobs in flight on ``w`` by client, cancelled ones left out."""
        running: dict[str, int] = {}
        for j in w.in_flight.values():
            if j.id not in w.cancelled:
                running[j.client] = running.get(j.client, 0) + 1
        return running

    async def _owed(self, w: Worker) -> dict[str, int] | None:
        """The slots of ``w`` kept for clients below their share (`reserved_slots`), or None. The store's
        waiting clients (those whose smallest job fits what ``w`` has left) are read only when a recently
        active client would be owed a slot without them (more clients can only lower a share)."""
        if self.config.reserve_s <= 0:
            return None
        running, recent = self._running_on(w), self._recent_on(w)
        if not reserved_slots(w.handle.slots, running, recent, set()):
            return None
        try:
            waiting = await asyncio.to_thread(self.store.waiting_clients)
        except StoreError as e:
            log.error("reading the waiting clients failed (no slot kept this time): %s", e)
            return None
        room = w.budget_bytes - w.used_bytes
        fit = {c for c, b in waiting.items() if b <= room or not w.in_flight}
        return reserved_slots(w.handle.slots, running, recent, fit) or None

    async def _share_slots(self) -> None:
        """Preempt one job on each full worker where a client holds more than its share of the slots
        while another waits with less (`fair_share_excess`), one of its jobs there may still be given
        back (`pick_preempted`) and a job of the waiting clients would fit the freed bytes; a worker
        with a preemption under way waits for it to land before another."""
        full = [w for w in self.workers if w.state is WorkerState.READY and w.handle.slots >= 2
                and len(w.in_flight) >= w.handle.slots and not w.preempted and not self._alone(w)]
        if not full:
            return
        try:
            waiting = await asyncio.to_thread(self.store.waiting_clients)
        except StoreError as e:
            log.error("reading the waiting clients failed: %s", e)
            return
        for c in self._cancelled_since_result:
            waiting.pop(c, None)
        for w in full:
            if len(w.in_flight) < w.handle.slots or w.preempted:  # changed while the store was read
                continue
            running = self._running_on(w)
            over = fair_share_excess(w.handle.slots, running, set(waiting))
            job = pick_preempted([j for j in w.in_flight.values() if j.client == over and j.id not in w.cancelled],
                                 self._preempted)
            if job is None:
                continue
            room = w.budget_bytes - w.used_bytes + job.est_bytes
            if not any(b <= room for c, b in waiting.items() if c != over):
                continue
            log.info("job %s of client %r preempted on %s: a waiting client gets its share of the slots",
                     job.id, over, w.handle.name)
            self.metrics.preempted.inc()
            w.preempted.add(job.id)
            self._preempted[job.id] = self._preempted.get(job.id, 0) + 1
            if len(self._preempted) > MAX_REMEMBERED_PREEMPTIONS:
                self._preempted.popitem(last=False)
            self._spawn(self._cancel_running(w, job.id))

    async def _lease_loop(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self.config.lease_s / 3)
            held = [(j.id, j.claim) for w in self.workers for j in w.in_flight.values()]
            try:
                lost = await asyncio.to_thread(self.store.heartbeat, held, self.config.lease_s)
                self._drop_lost(lost)
                reaped = await asyncio.to_thread(self.store.reap_expired)
            except StoreError as e:
                self.metrics.errors.inc(error_class="store_error")
                log.error("lease renewal failed: %s", e)
                continue
            if reaped:
                self.metrics.errors.inc(len(reaped), error_class="lease_expired")
                await self._notify_stored([i for i, s in reaped.items() if s is JobStatus.FAILED])
                self.wake()
            try:
                purged = await asyncio.to_thread(self.store.purge, time.time() - self.config.retention_s)
            except StoreError as e:
                log.error("removing finished jobs past the retention time failed: %s", e)
                continue
            if purged:
                log.info("removed %d job(s) finished more than %.0f s ago", purged, self.config.retention_s)

    def _drop_lost(self, job_ids: Sequence[str]) -> None:
        """Jobs in flight whose claim the store no longer holds (cancelled from elsewhere: a removed
        client's): their candidates are killed, as a cancel through the API would."""
        for w in self.workers:
            for job_id in job_ids:
                if job_id in w.in_flight and job_id not in w.cancelled:
                    log.info("job %s on %s was cancelled in the store; stopping it", job_id, w.handle.name)
                    w.cancelled.add(job_id)
                    self._spawn(self._cancel_running(w, job_id))

    async def _watch_loop(self) -> None:
        """Every second: a worker process that died (idle or busy) is restarted at once, and a
        worker holding a job past its deadline is killed (a backstop to `_run`'s own timeout)."""
        while not self._stopping:
            await asyncio.sleep(WATCH_EVERY_S)
            now = time.monotonic()
            for w in self.workers:
                if w.state is WorkerState.READY and not w.handle.alive:
                    self.metrics.errors.inc(error_class="worker_lost")
                    self._begin_check(w, "worker process gone", restart=True)
                overdue = [j for j, t in w.deadlines.items() if now > t + WATCH_EVERY_S]
                if overdue and w.handle.alive:
                    log.error("watchdog: %s held %s past its deadline; killing it", w.handle.name, overdue)
                    self._kill_for(w, overdue)

    # -- one job ------------------------------------------------------------------------------

    def _deadline_s(self, job: Job) -> float:
        """Seconds a worker may hold ``job``: its own ``timeout_s`` plus the grace (the largest
        allowed timeout when the stored request cannot be read: the watchdog never goes unbounded)."""
        try:
            timeout_s = float(json.loads(job.request_json or "{}").get("config", {}).get("timeout_s", 300.0))
        except (ValueError, TypeError, AttributeError):
            timeout_s = self.config.max_timeout_s
        if not 0 < timeout_s <= self.config.max_timeout_s:  # NaN included
            timeout_s = self.config.max_timeout_s
        return timeout_s + self.config.job_timeout_grace_s

    async def _run(self, w: Worker, job: Job) -> None:
        """One job on ``w``; every path ends in a result or a recorded failure, and frees the slot."""
        t0 = time.monotonic()
        try:
            limit = self._deadline_s(job)
            w.deadlines[job.id] = t0 + limit + STOP_PATIENCE_S
            answer = await self._within_deadline(w, job, limit)
        except asyncio.TimeoutError:
            self._kill_for(w, [job.id])
            await self._infra_failure(
                w,
                job,
                "worker_hung",
                f"worker {w.handle.name} held the job past "
                f"timeout_s + {self.config.job_timeout_grace_s:.0f} s and was killed",
            )
        except WorkerUnavailable as e:
            await self._give_back(w, job, str(e))
        except (ReferenceFailed, InfrastructureError) as e:
            if job.id in w.preempted | w.collateral:  # our kill ended it (its candidate, its own judge, its worker)
                await self._requeue_preempted(job)
            elif isinstance(e, ReferenceFailed):
                await self._reference_failed(job, str(e))
            else:
                await self._infra_failure(w, job, "evaluator_error" if w.handle.alive else "worker_lost", str(e))
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - our own bug: recorded, never a job stuck running
            log.exception("job %s: unexpected error", job.id)
            await self._infra_failure(w, job, "internal_error", f"{type(e).__name__} in the scheduler")
        else:
            if job.id in w.preempted | w.collateral and _killed(answer):
                await self._requeue_preempted(job)
            else:
                await self._complete(w, job, answer, time.monotonic() - t0)
        finally:
            w.in_flight.pop(job.id, None)
            w.deadlines.pop(job.id, None)
            w.cancelled.discard(job.id)
            w.preempted.discard(job.id)
            w.overdue.discard(job.id)
            w.collateral.discard(job.id)
            w.used_bytes -= job.est_bytes
            self._touch(job.client, w.handle.name)
            self.wake()

    def _kill_for(self, w: Worker, culprits: Sequence[str]) -> None:
        """Kill ``w`` for jobs that would not stop; its other jobs in flight were only beside them, so
        each goes back to the queue with its attempt uncounted (`_run`)."""
        w.collateral |= set(w.in_flight) - set(culprits)
        w.handle.kill()

    async def _within_deadline(self, w: Worker, job: Job, limit: float) -> str:
        """The worker's answer for ``job`` within ``limit`` seconds. Past it the job is stopped alone, as
        a cancel stops it (its candidate, a custom reference's own judge), and its answer, if it comes
        within `STOP_PATIENCE_S`, is a timeout: a reference or solution that keeps each of its steps
        under their own limits while the whole outlasts the job's must not take the worker, and every
        other job in flight on it, down with it. Only a job that does not stop raises TimeoutError
        (the worker is then killed)."""
        task = asyncio.ensure_future(w.handle.evaluate(job.request_json, job.id))
        try:
            return await asyncio.wait_for(asyncio.shield(task), limit)
        except asyncio.TimeoutError:
            log.warning("job %s passed its deadline (%.0f s) on %s; stopping it", job.id, limit, w.handle.name)
            w.overdue.add(job.id)
            await w.handle.cancel(job.id)
        try:
            await asyncio.wait_for(task, STOP_PATIENCE_S)
        except asyncio.TimeoutError:
            task.cancel()
            raise
        except (ReferenceFailed, InfrastructureError):  # our stop ended it (its own judge killed with it)
            pass
        try:
            key = EvalRequest.from_dict(json.loads(job.request_json)).problem.key
        except (ValueError, KeyError, TypeError):
            key = ""
        result = EvalResult(status=Status.TIMEOUT, problem_key=key, request_id=job.id,
                            error=f"the evaluation passed its timeout_s + {self.config.job_timeout_grace_s:.0f} s "
                                  f"({limit:.0f} s) and was stopped")
        return result.finalize().to_json()

    async def _requeue_preempted(self, job: Job) -> None:
        """A preempted job's candidate was killed: the job is queued again, its attempt not counted."""
        try:
            await asyncio.to_thread(self.store.release, [(job.id, job.claim)])
        except StoreError as e:
            log.error("re-queueing preempted %s failed (its lease will lapse): %s", job.id, e)

    async def _give_back(self, w: Worker, job: Job, why: str) -> None:
        """The worker was gone before the job reached it: the claim goes back uncounted."""
        log.warning("job %s handed back: %s", job.id, why)
        try:
            await asyncio.to_thread(self.store.release, [(job.id, job.claim)])
        except StoreError as e:
            log.error("handing back %s failed (its lease will lapse): %s", job.id, e)
        self._begin_check(w, why, restart=True)

    async def _complete(self, w: Worker, job: Job, answer: str, seconds: float) -> None:
        try:
            result = EvalResult.from_json(answer)
        except (ValueError, KeyError, TypeError) as e:
            await self._infra_failure(
                w, job, "bad_result", f"worker {w.handle.name} returned an unreadable result: {e}"
            )
            return
        cache_key, verdict = None, solution_verdict(result)
        try:
            if self.config.cache and verdict:
                cache_key = request_key(EvalRequest.from_dict(json.loads(job.request_json)), w.device_name)
            fin = await asyncio.to_thread(self.store.complete, job.id, job.claim, answer, cache_key, verdict)
        except (StoreError, ValueError, KeyError, TypeError) as e:
            self.metrics.errors.inc(error_class="store_error")
            log.error("storing the result of %s failed (its lease will lapse and it re-runs): %s", job.id, e)
            return
        w.completed += 1
        self._preempted.pop(job.id, None)
        if fin.current:  # a result; not the killed run of a job cancelled (hostile round 15, A03: that
            # run's end gave the canceller back a reservation, which kept the slot from the queued copy)
            self._cancelled_since_result.discard(job.client)
        self.metrics.results.inc(status=result.status.value)
        self.metrics.eval_seconds.observe(seconds)
        coalesced = len(fin.ids) - int(fin.current)
        if coalesced:
            self.metrics.cache_hits.inc(coalesced, kind="coalesced")
        await self._notify_stored(fin.ids)
        if result.status in (Status.CRASHED, Status.TIMEOUT) and job.id not in w.cancelled | w.preempted | w.overdue:
            # (a cancelled or preempted job's candidate crashed because we killed it: no news of the device)
            self._after_bad_end(w, job, result.status)

    def _after_bad_end(self, w: Worker, job: Job, status: Status) -> None:
        """A crash or timeout may be news of the device: the first of each client is checked by a
        canary, a client's later ones only every `ENDS_PER_CHECK` such ends on the worker, so a
        client streaming them cannot keep the worker checking instead of serving others."""
        w.ends_since_check += 1
        if job.client in w.cleared and w.ends_since_check < ENDS_PER_CHECK:
            return
        self._begin_check(w, f"job {job.id} ended {status.value}", client=job.client)

    async def _reference_failed(self, job: Job, message: str) -> None:
        log.info("job %s: the problem's reference failed: %s", job.id, message.splitlines()[0][:200])
        self.metrics.errors.inc(error_class="reference_error")
        try:
            if await asyncio.to_thread(self.store.reject, job.id, job.claim, "reference_error", message):
                await self._notify_stored([job.id])
        except StoreError as e:
            self.metrics.errors.inc(error_class="store_error")
            log.error("recording the failure of %s failed (its lease will lapse): %s", job.id, e)

    async def _infra_failure(self, w: Worker, job: Job, error_class: str, message: str) -> None:
        log.warning("job %s: %s: %s", job.id, error_class, message)
        self.metrics.errors.inc(error_class=error_class)
        w.infra_failures += 1
        try:
            status = await asyncio.to_thread(self.store.fail, job.id, job.claim, error_class, message)
        except StoreError as e:
            self.metrics.errors.inc(error_class="store_error")
            log.error("recording the failure of %s failed (its lease will lapse): %s", job.id, e)
            status = None
        if status is JobStatus.FAILED:
            await self._notify_stored([job.id])
        self._begin_check(
            w, f"{error_class}: {message}", restart=error_class in ("worker_hung", "worker_lost")
        )

    # -- views --------------------------------------------------------------------------------

    def workers_view(self) -> list[dict[str, Any]]:
        return [w.view() for w in self.workers]

    def ready_workers(self) -> int:
        return sum(w.state is WorkerState.READY for w in self.workers)

    def serving_workers(self) -> int:
        """Workers in service: ready, or canarying in place after a crash or timeout result (a
        routine check, not an outage: health does not flap on it)."""
        return sum(w.state in (WorkerState.READY, WorkerState.CHECKING) for w in self.workers)
