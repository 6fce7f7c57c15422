"""Per-device machinery of the orchestrator: the judges, the warm candidate pool, the device's
reader-writer lock, the concurrency slots and the cache of prepared problems.

A device has a small pool of judges (`JudgeSlot`): every comparison of a candidate's trial runs the
reference there, so one judge serialised the comparisons of every candidate in flight (measured on an
H100: 8 candidates, one judge, comparisons queued behind each other). A candidate's job sticks to one
judge for its whole session, because the judge keeps the job's reference outputs between the trial's
exports; jobs go to the judge with the fewest jobs assigned.

Lock order: a thread takes the device lock (shared or exclusive) before a judge's request lock
and never waits for the device lock while it holds a judge's, so the two cannot deadlock.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import threading
import time
from typing import Any, Callable, Iterator, Protocol

from drkernel.devices import Device
from drkernel.errors import InfrastructureError, JudgeError
from drkernel.gym.compile_cache import CompileCache
from drkernel.gym.ipc import MAX_HEADER, ChannelClosed, ChannelTimeout, Message, ProtocolViolation
from drkernel.gym.messages import Error, Op, Prepare, Prepared, Signal
from drkernel.gym.orchestrator.judge_pool import JUDGE_ROUTINGS, JudgeFreed, SharedJudge
from drkernel.gym.orchestrator.pool import Child, Talker, WarmPool
from drkernel.gym.orchestrator.zygote import Zygote
from drkernel.gym.seeds import public_seed
from drkernel.gym.orchestrator.sandbox import JUDGE_LIMITS, Runner

log = logging.getLogger(__name__)
JUDGE_TIMEOUT_S = 1800.0
CUDA_JUDGES = 2
"""Judges per CUDA device by default: two halved the comparisons' queue at 8 candidates in flight; each
costs a CUDA context and its own reference model cache on the device. CPU devices get one (the
interpreter is CPU-bound: a second judge competes with the candidates for the same cores)."""


PREPARED_CACHE_BYTES = 64 << 20
"""Bytes of prepared problems (scaled and second-size reference code) a device keeps for reuse."""


class WaitCancelled(Exception):
    """The evaluation was cancelled while it waited for a candidate place, device memory or the
    device's lock (shared, or exclusive for a timed region or a drain): it ends there (a job past its
    deadline is stopped alone, whichever of these it waited for)."""


WAIT_POLL_S = 0.2
"""How often a waiting evaluation looks whether it was cancelled (`cancellable_waits`)."""
_waits = threading.local()


@contextlib.contextmanager
def cancellable_waits(cancelled: Callable[[], bool]) -> Iterator[None]:
    """This thread's waits for a place, memory or the device lock (a shared hold, a timed region or a
    drain, the other processes' `OuterLock` included) end in `WaitCancelled` once ``cancelled()`` (they
    look every `WAIT_POLL_S`)."""
    _waits.cancelled = cancelled
    try:
        yield
    finally:
        _waits.cancelled = None


def _poll_s() -> float | None:
    """How long one wait may block before this thread looks at its cancellation (None: no limit)."""
    return WAIT_POLL_S if getattr(_waits, "cancelled", None) is not None else None


def _check_cancelled(what: str) -> None:
    cancelled = getattr(_waits, "cancelled", None)
    if cancelled is not None and cancelled():
        raise WaitCancelled(f"the evaluation was cancelled while it waited for {what}")


def _prepared_size(p: Prepared) -> int:
    """About what a kept `Prepared` holds: its code, and a fixed allowance for the rest."""
    return len(p.code) + len(p.second_code or "") + 4096


class JudgeLost(InfrastructureError):
    """The judge process died or stopped answering; it has been restarted."""


class JudgeOutOfMemory(JudgeError):
    """The judge ran out of device memory running the reference (the device was full: retry)."""


JOB_MEMORY_FACTOR = 11
"""Device bytes one evaluation may hold at its peak, in multiples of its inputs' bytes: the candidate's
inputs, outputs, staging buffer and timing clones, the judge's inputs, outputs and TF32 re-run. Measured
on an H100 (2026-11-24): one 19_ReLU evaluation (6.4 GB of inputs) peaked at 68.8 GB of the device, 10.7x;
at 8x (51 GB claimed) small evaluations were admitted beside it and the judge ran out of memory."""
MEMORY_FRACTION = 0.85
"""The share of the device's memory that admitted evaluations may claim together."""
class MemoryBudget:
    """A weighted semaphore of device bytes: an evaluation claims its estimate before its candidate
    starts and waits while the claims in flight would pass the budget. Claims are served in arrival
    order (a large claim is not starved by small ones passing it); a claim above the whole budget runs
    alone (it waits for an empty device). Two judges and eight candidates of a full-size KernelBench
    problem do not fit on one 80 GB device together; without this the judge ran out of memory
    (measured on an H100, 2026-11-24)."""

    def __init__(self, total: int) -> None:
        self.total = max(0, total)
        self.used = 0
        self._cond = threading.Condition()
        self._queue: collections.deque[object] = collections.deque()

    @contextlib.contextmanager
    def claim(self, nbytes: int) -> Iterator[None]:
        n = min(max(0, nbytes), self.total)
        ticket = object()
        with self._cond:
            self._queue.append(ticket)
            while self._queue[0] is not ticket or (self.used and self.used + n > self.total):
                self._cond.wait(_poll_s())
                try:
                    _check_cancelled("device memory")
                except WaitCancelled:
                    self._queue.remove(ticket)
                    self._cond.notify_all()
                    raise
            self._queue.popleft()
            self.used += n
            self._cond.notify_all()  # the next in line may fit too
        try:
            yield
        finally:
            with self._cond:
                self.used -= n
                self._cond.notify_all()


class OuterLock(Protocol):
    """The same device's lock among processes (e.g. `drkernel.organism.turns.DeviceTurns`, where runs in
    separate processes share one GPU): `RWLock` takes it exclusively after its own exclusive hold (a
    timed region, a reference timing's drain) and releases it before giving its own back, so a timed
    region also waits for what other processes hold on the device."""

    def acquire_exclusive(self, cancelled: Callable[[], bool] | None = None) -> bool:
        """Hold the device exclusively: True once held; False, holding nothing more than before, once
        ``cancelled()`` while it waited (None: it waits until held)."""

    def release_exclusive(self) -> None: ...


class RWLock:
    """The device's lock: many shared holders or one exclusive holder, and two kinds of writer.

    * A *timed region* (`acquire_exclusive`; a candidate's own through `enter_region`) waits for the
      shared holders to release.
    * A *drain* (``acquire_exclusive(drain=True)``: the reference's timing, cached for the whole run)
      also waits until no candidate session is a member any more (`join` .. `leave`), so device work a
      stopped candidate queued before it stopped cannot run inside it. A member going back to a shared
      hold after its own region (`leave_region`) does not wait for a drain, which waits for it.

    Waiting writers of either kind block new shared holders and new members. (A finer schedule, shared
    holds only while a candidate works on the device with the others parked and stopped during a region,
    was replayed against an H100 run's stage durations and lost: `benchmarks/schedule_replay.py`.)

    With ``batch`` ``(k, t)`` waiting regions block new holders only once they are *due*: ``k`` of them
    wait, or the oldest has waited ``t`` seconds. Until then new sessions join and work beside the ones
    already in flight; when due, the device drains once for all the regions waiting. A region's candidate
    waiting for its region calls ``park`` first (`Slots.park`: its slot goes to the next evaluation).
    Nothing runs beside a region either way: a region still waits for every shared holder to release.
    With ``outer`` (`OuterLock`) every exclusive hold also holds the other processes' lock, taken after
    this lock's own (so in one order only) and released before it.
    """

    def __init__(self, batch: tuple[int, float] | None = None, park: Callable[[], None] | None = None,
                 outer: OuterLock | None = None) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._regions_waiting = 0
        self._drains_waiting = 0
        self._members = 0
        self._batch = batch
        self._park = park
        self._region_since: list[float] = []  # when each waiting region started to wait
        self._batch_due = False
        self._outer = outer

    def _due_in(self) -> float | None:
        """With the condition held: 0 when waiting regions block new holders now, the seconds until they
        will (the oldest's wait reaching ``t``), None when no region waits. A batch once due stays due
        until every region waiting has run (the regions that came during its drain included)."""
        if not self._regions_waiting:
            return None
        if self._batch is None or self._batch_due:
            return 0.0
        left = min(self._region_since) + self._batch[1] - time.monotonic()
        if self._regions_waiting >= self._batch[0] or left <= 0:
            self._batch_due = True
            return 0.0
        return left

    def _wait_for_writers(self, drains: bool = True, cancellable: bool = False) -> None:
        while True:
            due = self._due_in()
            if not (self._writer or due == 0.0 or (drains and self._drains_waiting)):
                return
            wait = None if self._writer or due is None or due == 0.0 else due
            poll = _poll_s() if cancellable else None
            self._cond.wait(poll if wait is None else min(wait, poll or wait))
            if cancellable:
                _check_cancelled("the device's lock")

    def acquire_shared(self) -> None:
        """A shared hold outside any candidate session (a judge request, a warm-up)."""
        with self._cond:
            self._wait_for_writers()
            self._readers += 1

    def release_shared(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def join(self) -> None:
        """A candidate session's shared hold, and its membership until `leave` (a cancelled evaluation's
        wait for it ends in `WaitCancelled`)."""
        with self._cond:
            self._wait_for_writers(cancellable=True)
            self._readers += 1
            self._members += 1

    def leave(self, exclusive: bool = False) -> None:
        """The session's end: its hold (shared, or its region's when ``exclusive``) and its membership."""
        if exclusive:
            self._release()
        with self._cond:
            if not exclusive:
                self._readers -= 1
            self._members -= 1
            self._cond.notify_all()

    def enter_region(self) -> None:
        """A member's timed region, from its shared hold (waits as a timed region; parked while it waits).
        A cancelled evaluation's wait (`cancellable_waits`) ends in `WaitCancelled` with the member back
        on its shared hold, as before the call (taken once no timed region holds the device)."""
        if self._park is not None:
            self._park()
        with self._cond:
            self._readers -= 1
            try:
                self._take_exclusive(drain=False)
            except WaitCancelled:
                self._back_to_shared()
                raise
        try:
            self._hold_outer()
        except WaitCancelled:
            with self._cond:
                self._writer = False  # ours: no region holds, so the shared hold is ours again at once
                self._back_to_shared()
            raise

    def _back_to_shared(self) -> None:
        """With the condition held: a cancelled region's member holds shared again, once no region holds
        the device (not after the regions waiting, which may wait long for other holders)."""
        while self._writer:
            self._cond.wait()
        self._readers += 1
        self._cond.notify_all()

    def _hold_outer(self) -> None:
        """With this lock held exclusively: the other processes' lock too (`OuterLock`), waiting in a way
        this thread's cancellation ends (`WaitCancelled`; this lock's own hold is then still held)."""
        if self._outer is not None and not self._outer.acquire_exclusive(getattr(_waits, "cancelled", None)):
            raise WaitCancelled("the evaluation was cancelled while it waited for the device's lock "
                                "(held by another process)")

    def leave_region(self) -> None:
        """A member's region ends: it holds shared again once the regions waiting meanwhile are done (not
        the drains: they wait for this session)."""
        self._release()
        with self._cond:
            self._wait_for_writers(drains=False)
            self._readers += 1

    def acquire_exclusive(self, drain: bool = False) -> None:
        """Hold the device exclusively (a timed region, or a ``drain``); a cancelled evaluation's wait
        (`cancellable_waits`) ends in `WaitCancelled`, holding nothing."""
        with self._cond:
            self._take_exclusive(drain)
        try:
            self._hold_outer()
        except WaitCancelled:
            with self._cond:
                self._writer = False
                self._cond.notify_all()
            raise

    def _take_exclusive(self, drain: bool) -> None:
        """With the condition held: wait as a writer of that kind (counted, so shared holders see it),
        then hold the device exclusively. Cancelled (`WaitCancelled`), it is no longer counted and the
        holders it kept out are woken."""
        since = time.monotonic()
        if drain:
            self._drains_waiting += 1
        else:
            self._regions_waiting += 1
            self._region_since.append(since)
        self._cond.notify_all()
        try:
            while self._writer or self._readers or (drain and self._members):
                self._cond.wait(_poll_s())
                _check_cancelled("the device's lock")
        except WaitCancelled:
            self._stop_waiting(drain, since)
            self._cond.notify_all()
            raise
        self._stop_waiting(drain, since)
        self._writer = True

    def _stop_waiting(self, drain: bool, since: float) -> None:
        """With the condition held: a writer waiting since ``since`` waits no more."""
        if drain:
            self._drains_waiting -= 1
        else:
            self._regions_waiting -= 1
            self._region_since.remove(since)
            self._batch_due = self._batch_due and self._regions_waiting > 0  # the batch has run (or left)

    def release_exclusive(self) -> None:
        self._release()

    def _release(self) -> None:
        if self._outer is not None:
            self._outer.release_exclusive()
        with self._cond:
            self._writer = False
            self._cond.notify_all()

    @property
    def writers_waiting(self) -> int:
        with self._cond:
            return self._regions_waiting + self._drains_waiting

    @property
    def contended(self) -> bool:
        """A timed region holds, or waits and is due (a finished candidate's exit grace ends at once)."""
        with self._cond:
            return self._writer or self._due_in() == 0.0

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextlib.contextmanager
    def exclusive(self, drain: bool = False) -> Iterator[None]:
        self.acquire_exclusive(drain)
        try:
            yield
        finally:
            self.release_exclusive()


class Slots:
    """A device's ``concurrency`` candidate places, each held by one evaluation's thread for its session.
    With batched regions a session waiting for its timed region gives its place back (`park`): it is
    stopped and holds the device no more, and the next evaluation starts meanwhile; its device memory
    stays claimed (`MemoryBudget`), and it does not take a place again (its region and the little after
    it run beyond the count)."""

    def __init__(self, concurrency: int) -> None:
        self._free = threading.Semaphore(concurrency)
        self._local = threading.local()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        while not self._free.acquire(timeout=_poll_s()):
            _check_cancelled("a candidate place")
        self._local.held = True
        try:
            yield
        finally:
            self.park()

    def park(self) -> None:
        """This thread's place back, if it holds one."""
        if getattr(self._local, "held", False):
            self._local.held = False
            self._free.release()


class WarmUpGate:
    """The warm pool's gate (`pool.Gate`): a starting candidate's ``go`` and its ``ready`` under the
    device's shared hold, while it creates its CUDA context and runs its warm-up kernel, so that neither
    lands inside a timed region."""

    def __init__(self, rw: RWLock) -> None:
        self.rw = rw

    def __call__(self, child: Talker, deadline: float) -> Message:
        with self.rw.shared():
            child.send(Signal(Op.GO).to_header())
            return child.recv(deadline)


class JudgeSlot:
    """One judge child, the lock that serialises requests to it, and how many jobs stick to it
    (``freed``: notified after each request, for `judge_pool.SharedJudge` requests waiting for any)."""

    MAX_HEADER = MAX_HEADER
    """The longest reply header taken from it (a judge that runs a request's reference takes less)."""

    def __init__(self, index: int, start: Any, freed: JudgeFreed | None = None) -> None:
        self.index = index
        self._start = start
        self.child: Child = start()
        self.lock = threading.Lock()
        self.freed = freed
        self.jobs = 0
        self.served = 0  # requests answered (for stats and tests)
        self.busy_s = 0.0  # seconds spent answering them (for the sustained benchmark's judge load)

    def call(self, header: dict[str, Any], blob: bytes, timeout_s: float, fds: list[int] | None) -> dict:
        try:
            with self.lock:
                return self.call_locked(header, blob, timeout_s, fds)
        finally:
            if self.freed is not None:
                self.freed.notify()

    def call_locked(self, header: dict[str, Any], blob: bytes, timeout_s: float, fds: list[int] | None) -> dict:
        """One request, with `lock` held by the caller."""
        t = time.monotonic()
        try:
            self.child.send(header, blob, fds)
            reply = self.child.recv(time.monotonic() + timeout_s, max_header=self.MAX_HEADER).header
            self.served += 1
            self.busy_s += time.monotonic() - t
            return reply
        except (ChannelClosed, ChannelTimeout, ProtocolViolation) as e:
            tail = self.child.log_tail(4000)
            self.restart()
            raise JudgeLost(f"judge {self.index} lost during {header.get('op')!r}: {e}\n{tail}") from e

    def restart(self) -> None:
        log.warning("restarting judge %d", self.index)
        self.child.discard()
        self.child = self._start()
        self.child.wait_ready()

    def shutdown(self) -> None:
        with self.lock:
            try:
                self.child.send(Signal(Op.SHUTDOWN).to_header())
            except ChannelClosed:
                pass
            self.child.discard()


class DeviceRuntime:
    """Judge + warm pool + locks for one device. Starts in the background; `wait_ready` joins."""

    def __init__(self, device: str, *, pool_size: int, concurrency: int, env: dict[str, str],
                 runner: Runner, zygote: bool = True, judges: int = 0,
                 compile_cache: CompileCache | None = None, judge_routing: str = "sticky",
                 region_batch: tuple[int, float] | None = None, outer_lock: OuterLock | None = None) -> None:
        if judge_routing not in JUDGE_ROUTINGS:
            raise ValueError(f"judge_routing {judge_routing!r}: one of {JUDGE_ROUTINGS}")
        self.requested = device
        self.judge_routing = judge_routing
        self.judge_freed = JudgeFreed()
        self.compile_cache = compile_cache
        self.runner = runner
        self.use_zygote = zygote and runner.sandboxed
        self.zygote: Zygote | None = None
        self.pool_size = pool_size
        self.concurrency = concurrency
        self.env = env
        self.slots = Slots(concurrency)
        self.region_batch = region_batch
        self.rw = RWLock(region_batch, self.slots.park if region_batch else None, outer_lock)
        self.warm_up_gate = WarmUpGate(self.rw)
        self.in_flight = 0
        self.hello: dict[str, Any] = {}
        self.pool: WarmPool | None = None
        self.judges_wanted = judges  # 0: CUDA_JUDGES on a CUDA device, 1 elsewhere
        self.judges: list[JudgeSlot] = []
        self.memory = MemoryBudget(0)  # sized from the first judge's hello (CUDA only)
        self._closing = False
        self._count_lock = threading.Lock()
        self._prepared: collections.OrderedDict[tuple, Prepared] = collections.OrderedDict()  # least recently used first
        self._prepared_bytes = 0
        self._prepared_lock = threading.Lock()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._first: Child | None = None  # the one-shot evaluation's candidate, started beside the judge
        self._zygote_tried = False
        self._zygote_lock = threading.Lock()
        threading.Thread(target=self._start, name=f"runtime-{device}", daemon=True).start()

    def _start(self) -> None:
        """The judge and the candidates' source start side by side (each ~5 s on a GPU: imports, CUDA).

        With a warm pool that source is the zygote. Without one (``pool_size`` 0: `drkernel gym eval`'s
        one-shot evaluation) the first candidate starts as a fresh process beside the judge, so the
        evaluation waits for neither the zygote's own start (its seed and probe forks) nor a fork after
        it; the zygote starts when a second candidate is asked for."""
        guess = Device.parse(self.requested).guess()
        one_shot = self.pool_size == 0
        early = threading.Thread(target=self._start_first if one_shot else self._start_zygote, args=(guess,),
                                 name=f"candidates-{guess}", daemon=True)
        started_early = one_shot or self.use_zygote
        if started_early:
            early.start()
        try:
            judge = JudgeSlot(0, self._judge_starter(self.requested), self.judge_freed)
            self.hello = judge.child.wait_ready()
            judge._start = self._judge_starter(self.device)  # a restart goes to the resolved device
            if self.is_cuda:
                self.memory = MemoryBudget(int(int(self.hello.get("total_memory") or 0) * MEMORY_FRACTION))
            self.judges = [judge]
            self._more_judges()
            if started_early:
                early.join()
            if guess != self.device:  # "auto" guessed wrong: what started is for another device
                self._discard_early()
                if self.use_zygote and not one_shot:
                    self._start_zygote(self.device)
            self.pool = WarmPool(self.device, self.pool_size, self.env, self.runner, gate=self.warm_up_gate,
                                 spawn=self._spawn)
            if self._first is not None:
                self.pool.give(self._first)
                self._first = None
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()

    def _start_first(self, device: str) -> None:
        """A one-shot evaluation's candidate, started fresh (no zygote) beside the judge."""
        try:
            child = self._fresh_candidate(device)
            child.wait_ready(gate=self.warm_up_gate)
            self._first = child
        except Exception as e:  # the pool starts one in the foreground when asked
            log.warning("the first candidate on %s did not start: %s", device, e)

    def _discard_early(self) -> None:
        if self._first is not None:
            self._first.discard()
            self._first = None
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def _spawn(self) -> Any:
        """A new candidate: a zygote's fork, or a fresh process while there is no zygote. Without a warm
        pool the zygote starts at the first spawn (the one-shot evaluation's candidate started fresh)."""
        with self._zygote_lock:
            if self.zygote is None and self.use_zygote and not self._zygote_tried:
                self._start_zygote(self.device)
        if self.zygote is not None:
            return self.zygote.fork()
        return self._fresh_candidate(self.device)

    def _fresh_candidate(self, device: str) -> Child:
        return Child("drkernel.gym.candidate", device, self.env, self.runner)

    def _judge_starter(self, device: str) -> Any:
        return lambda: Child("drkernel.gym.judge", device, self.env, self.runner, JUDGE_LIMITS)

    def _more_judges(self) -> None:
        """The pool's other judges, started in the background once the first resolved the device; each
        joins the pool when ready (the device is usable with the first: a one-shot evaluation does not
        wait for them). One judge where there is no warm pool (one evaluation at a time)."""
        n = self.judges_wanted or (CUDA_JUDGES if self.is_cuda and self.pool_size else 1)

        def start(i: int) -> None:
            try:
                slot = JudgeSlot(i, self._judge_starter(self.device), self.judge_freed)
                slot.child.wait_ready()
            except Exception as e:  # the pool works with fewer judges
                log.warning("judge %d on %s did not start: %s", i, self.device, e)
                return
            with self._count_lock:
                if self._closing:
                    slot.shutdown()
                else:
                    self.judges.append(slot)

        for i in range(1, n):
            threading.Thread(target=start, args=(i,), name=f"judge-{i}-{self.device}", daemon=True).start()

    def _start_zygote(self, device: str) -> None:
        self._zygote_tried = True
        try:
            self.zygote = Zygote(device, self.env, self.runner)
        except Exception as e:  # fresh candidates still work, only slower to start
            log.warning("no zygote on %s (%s); candidates start as fresh processes", device, e)
            self.zygote = None

    def wait_ready(self) -> "DeviceRuntime":
        self._ready.wait()
        if self._error is not None:
            raise InfrastructureError(f"device runtime {self.requested!r} failed to start: {self._error}")
        return self

    @property
    def ready(self) -> bool:
        return self._ready.is_set() and self._error is None

    @property
    def device(self) -> str:
        return str(self.hello.get("device", self.requested))

    @property
    def device_name(self) -> str:
        return str(self.hello.get("device_name", ""))

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    @contextlib.contextmanager
    def slot(self, input_bytes: int = 0) -> Iterator[None]:
        """One of ``concurrency`` candidate places on this device, and the device memory an evaluation
        with ``input_bytes`` of inputs may need (`MemoryBudget`; nothing on CPU)."""
        with self.slots.held(), self.memory.claim(JOB_MEMORY_FACTOR * input_bytes):
            with self._count_lock:
                self.in_flight += 1
            try:
                yield
            finally:
                with self._count_lock:
                    self.in_flight -= 1

    @property
    def judge(self) -> Child | None:
        """The first judge's child (the one whose hello describes the device)."""
        return self.judges[0].child if self.judges else None

    @contextlib.contextmanager
    def judge_for_job(self) -> Iterator[JudgeSlot | SharedJudge]:
        """The judge a candidate's job sticks to (the one with the fewest jobs) for its session; under
        ``shared`` routing the job's view of every judge, that one first (`judge_pool`)."""
        with self._count_lock:
            slot = min(self.judges, key=lambda j: (j.jobs, j.index))
            slot.jobs += 1
        try:
            yield slot if self.judge_routing == "sticky" else SharedJudge(self.judges, slot, self.judge_freed)
        finally:
            with self._count_lock:
                slot.jobs -= 1

    def judge_call(self, header: dict[str, Any], blob: bytes = b"", timeout_s: float = JUDGE_TIMEOUT_S,
                   fds: list[int] | None = None, judge: JudgeSlot | SharedJudge | None = None) -> dict:
        """One request to ``judge`` (default: the least busy; ``fds``: descriptors relayed with it, a
        candidate's staging buffer). Raises `JudgeError` when it reports a failure of the reference,
        `JudgeLost` (after restarting it) when it died or hung."""
        if judge is None:
            with self._count_lock:
                judge = min(self.judges, key=lambda j: (j.lock.locked(), j.jobs, j.index))
        reply = judge.call(header, blob, timeout_s, fds)
        if reply.get("op") == Op.ERROR:
            e = Error.from_header(reply)
            kind = JudgeOutOfMemory if e.type == "OutOfMemoryError" else JudgeError
            raise kind(f"judge failed on {header.get('op')!r}: {e.type}: {e.message}\n{e.traceback}")
        return reply

    def prepare(self, problem: Any, config: Any, judge: JudgeSlot | None = None) -> Prepared:
        """Scaled code, second-size code and input bytes of a problem (cached; ``judge``: where the
        reference runs, default the least busy of the device's judges)."""
        budget = config.cpu_element_budget if config.cpu_scale else None  # unscaled: one preparation whatever it says
        key = (problem.code_hash, config.cpu_scale, budget, config.second_size, public_seed(config.seed))
        with self._prepared_lock:
            hit = self._prepared.get(key)
            if hit is not None:
                self._prepared.move_to_end(key)
                return hit
        with self.rw.shared():  # the judge runs the reference here: never inside a timed region
            prepared = Prepared.from_header(self.judge_call(Prepare(
                problem.to_dict(), config.cpu_scale, config.cpu_element_budget, config.second_size,
                public_seed(config.seed)).to_header(), judge=judge))
        self._remember_prepared(key, prepared)
        return prepared

    def _remember_prepared(self, key: tuple, prepared: Prepared) -> None:
        """Keep ``prepared`` while the kept ones' code fits `PREPARED_CACHE_BYTES` (the least
        recently used go first): distinct problems cannot grow a worker without bound."""
        with self._prepared_lock:
            old = self._prepared.pop(key, None)
            self._prepared_bytes -= 0 if old is None else _prepared_size(old)
            self._prepared[key] = prepared
            self._prepared_bytes += _prepared_size(prepared)
            while self._prepared_bytes > PREPARED_CACHE_BYTES and len(self._prepared) > 1:
                _, dropped = self._prepared.popitem(last=False)
                self._prepared_bytes -= _prepared_size(dropped)

    def info(self) -> dict[str, Any]:
        return {"device": self.device, "name": self.device_name, "ready": self.ready, "in_flight": self.in_flight,
                "concurrency": self.concurrency, "pool_size": self.pool_size,
                "pool_ready": self.pool.ready_count if self.pool else 0,
                "total_memory": self.hello.get("total_memory"), "versions": self.hello.get("versions", {}),
                "sandbox": self.runner.name, "zygote": self.zygote is not None, "judges": len(self.judges),
                "judge_routing": self.judge_routing, "region_batch": self.region_batch, "judge_busy_s": [round(j.busy_s, 3) for j in self.judges],
                "compile_cache": self.compile_cache.stats() if self.compile_cache else None}

    def close(self) -> None:
        self._ready.wait()
        if self.pool is not None:
            self.pool.close()
        if self.zygote is not None:
            self.zygote.close()
        with self._count_lock:
            self._closing = True
            judges = list(self.judges)
        for slot in judges:
            slot.shutdown()
