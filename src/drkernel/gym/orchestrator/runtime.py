"""Per-device machinery of the orchestrator: the judge child, the warm candidate pool, the device's
reader-writer lock, the concurrency slots and the cache of prepared problems.

Lock order: a thread takes the device lock (shared or exclusive) before the judge's request lock
and never waits for the device lock while it holds the judge's, so the two cannot deadlock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any, Iterator

from drkernel.errors import InfrastructureError, JudgeError
from drkernel.gym.ipc import ChannelClosed, ChannelTimeout, ProtocolViolation
from drkernel.gym.messages import Error, Op, Prepare, Prepared, Signal
from drkernel.gym.orchestrator.pool import Child, WarmPool
from drkernel.gym.orchestrator.zygote import Zygote
from drkernel.gym.seeds import public_seed
from drkernel.gym.orchestrator.sandbox import JUDGE_LIMITS, Runner

log = logging.getLogger(__name__)
JUDGE_TIMEOUT_S = 1800.0


class JudgeLost(InfrastructureError):
    """The judge process died or stopped answering; it has been restarted."""


class RWLock:
    """Many shared holders or one exclusive holder; waiting writers block new readers."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    def acquire_shared(self) -> None:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1

    def release_shared(self) -> None:
        with self._cond:
            self._readers -= 1
            self._cond.notify_all()

    def acquire_exclusive(self) -> None:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True

    def release_exclusive(self) -> None:
        with self._cond:
            self._writer = False
            self._cond.notify_all()

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()


class DeviceRuntime:
    """Judge + warm pool + locks for one device. Starts in the background; `wait_ready` joins."""

    def __init__(self, device: str, *, pool_size: int, concurrency: int, env: dict[str, str],
                 runner: Runner, zygote: bool = True) -> None:
        self.requested = device
        self.runner = runner
        self.use_zygote = zygote and runner.sandboxed
        self.zygote: Zygote | None = None
        self.pool_size = pool_size
        self.concurrency = concurrency
        self.env = env
        self.rw = RWLock()
        self.slots = threading.Semaphore(concurrency)
        self.in_flight = 0
        self.hello: dict[str, Any] = {}
        self.pool: WarmPool | None = None
        self.judge: Child | None = None
        self._judge_lock = threading.Lock()
        self._count_lock = threading.Lock()
        self._prepared: dict[tuple, Prepared] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None
        threading.Thread(target=self._start, name=f"runtime-{device}", daemon=True).start()

    def _start(self) -> None:
        """The judge and the zygote start side by side (each ~5 s on a GPU: imports, CUDA)."""
        zygote = threading.Thread(target=self._start_zygote, name=f"zygote-{self.requested}", daemon=True)
        early = self.use_zygote and self.requested != "auto"  # "auto" is resolved by the judge
        if early:
            zygote.start()
        try:
            self.judge = Child("drkernel.gym.judge", self.requested, self.env, self.runner, JUDGE_LIMITS)
            self.hello = self.judge.wait_ready()
            if self.use_zygote:
                if not early:
                    zygote.start()
                zygote.join()
            spawn = self.zygote.fork if self.zygote is not None else None
            self.pool = WarmPool(self.device, self.pool_size, self.env, self.runner, gate=self.rw.shared, spawn=spawn)
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()

    def _start_zygote(self) -> None:
        try:
            self.zygote = Zygote(self.device, self.env, self.runner)
        except Exception as e:  # fresh candidates still work, only slower to start
            log.warning("no zygote on %s (%s); candidates start as fresh processes", self.requested, e)
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
    def slot(self) -> Iterator[None]:
        """One of ``concurrency`` candidate places on this device."""
        with self.slots:
            with self._count_lock:
                self.in_flight += 1
            try:
                yield
            finally:
                with self._count_lock:
                    self.in_flight -= 1

    def judge_call(self, header: dict[str, Any], blob: bytes = b"", timeout_s: float = JUDGE_TIMEOUT_S,
                   fds: list[int] | None = None) -> dict:
        """One request to the judge (``fds``: descriptors relayed with it, a candidate's staging
        buffer). Raises `JudgeError` when it reports a failure of the reference, `JudgeLost` (after
        restarting it) when it died or hung."""
        with self._judge_lock:
            assert self.judge is not None
            try:
                self.judge.send(header, blob, fds)
                reply = self.judge.recv(time.monotonic() + timeout_s).header
            except (ChannelClosed, ChannelTimeout, ProtocolViolation) as e:
                tail = self.judge.log_tail(4000)
                self._restart_judge()
                raise JudgeLost(f"judge lost during {header.get('op')!r}: {e}\n{tail}") from e
        if reply.get("op") == Op.ERROR:
            e = Error.from_header(reply)
            raise JudgeError(f"judge failed on {header.get('op')!r}: {e.type}: {e.message}\n{e.traceback}")
        return reply

    def _restart_judge(self) -> None:
        log.warning("restarting the judge on %s", self.device)
        assert self.judge is not None
        self.judge.discard()
        self.judge = Child("drkernel.gym.judge", self.device, self.env, self.runner, JUDGE_LIMITS)
        self.judge.wait_ready()

    def prepare(self, problem: Any, config: Any) -> Prepared:
        """Scaled code, second-size code and input bytes of a problem (cached)."""
        key = (problem.code_hash, config.cpu_scale, config.cpu_element_budget, config.second_size, public_seed(config.seed))
        if key not in self._prepared:
            with self.rw.shared():  # the judge runs the reference here: never inside a timed region
                self._prepared[key] = Prepared.from_header(self.judge_call(Prepare(
                    problem.to_dict(), config.cpu_scale, config.cpu_element_budget, config.second_size,
                    public_seed(config.seed)).to_header()))
        return self._prepared[key]

    def info(self) -> dict[str, Any]:
        return {"device": self.device, "name": self.device_name, "ready": self.ready, "in_flight": self.in_flight,
                "concurrency": self.concurrency, "pool_size": self.pool_size,
                "pool_ready": self.pool.ready_count if self.pool else 0,
                "total_memory": self.hello.get("total_memory"), "versions": self.hello.get("versions", {}),
                "sandbox": self.runner.name, "zygote": self.zygote is not None}

    def close(self) -> None:
        self._ready.wait()
        if self.pool is not None:
            self.pool.close()
        if self.zygote is not None:
            self.zygote.close()
        if self.judge is not None:
            with self._judge_lock:
                try:
                    self.judge.send(Signal(Op.SHUTDOWN).to_header())
                except ChannelClosed:
                    pass
                self.judge.discard()
