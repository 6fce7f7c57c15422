"""Device workers: one process per device, each holding one evaluator (for the gym: a judge, a warm
pool of candidate children and the device's reader-writer lock).

The server (the orchestrator) never imports solution code and never touches the device: it talks to
a worker through a pipe. A worker that dies (kill -9, a lost judge that takes it down) fails its
in-flight jobs with `InfrastructureError`; the scheduler re-queues them once and restarts the
worker. Standard library only, so `benchmarks/worker_throughput_gpu.py` drives this layer on GPU
hosts that have no web stack installed.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import multiprocessing as mp
import os
import signal
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Protocol

from drkernel.devices import Device, DeviceKind
from drkernel.errors import ConfigError, DrKernelError, InfrastructureError, JudgeError

log = logging.getLogger(__name__)

CPU_BUDGET_BYTES = 4 << 30
HOST_MEMORY_FRACTION = 0.9
"""Share of a GPU host's physical memory its workers' request code may hold (the rest: the server,
the workers' own processes, the system)."""


class WorkerHandle(Protocol):
    """What the scheduler needs from a device worker, local process or Ray actor."""

    name: str
    device: str
    slots: int

    async def start(self) -> dict[str, Any]:
        """Start the worker; returns its device info (``device_name``, ``memory_bytes``, ...)."""
        ...

    async def evaluate(self, request_json: str, job_id: str = "") -> str:
        """Evaluate one request (`EvalRequest` JSON); returns `EvalResult` JSON. Raises
        `WorkerUnavailable` when the worker was gone before the request reached it, and
        `InfrastructureError` when the worker or its evaluator failed."""
        ...

    async def cancel(self, job_id: str) -> None:
        """Stop the running evaluation of ``job_id``: its candidate and, for a request's reference,
        its own judge (the evaluation then ends at once and its slot is free)."""
        ...

    @property
    def alive(self) -> bool: ...

    def kill(self) -> None:
        """Kill the worker at once (a hung worker); its in-flight calls fail."""
        ...

    async def stop(self) -> None: ...

    def describe(self) -> dict[str, Any]:
        """Where it runs (pid, node) for /v1/workers."""
        ...


class WorkerUnavailable(InfrastructureError):
    """The worker was not running when a request was sent: the job never reached it (no attempt
    is spent on it)."""


class ReferenceFailed(DrKernelError):
    """The judge could not build or run the problem's reference: the request's fault (a custom
    reference that raises), not the worker's; the job fails at once, with no retry or canary."""


def answer_error(worker: str, kind: str, payload: str) -> Exception:
    """The exception for a worker's answer that is not a result (``kind`` of `run_one`)."""
    if kind == "reference_error":
        return ReferenceFailed(f"the problem's reference failed: {payload}")
    return InfrastructureError(f"evaluator on {worker} raised {payload}")


class JobThreads:
    """Which evaluator thread runs which job, so a cancel reaches the job's evaluation: the
    evaluator's ``cancel_thread(ident)`` (when it has one) stops what that thread runs."""

    def __init__(self) -> None:
        self._threads: dict[str, int] = {}
        self._lock = threading.Lock()

    def run(self, evaluator, request_json: str, job_id: str) -> tuple[str, str]:
        with self._lock:
            self._threads[job_id] = threading.get_ident()
        try:
            return run_one(evaluator, request_json)
        finally:
            with self._lock:
                self._threads.pop(job_id, None)

    def cancel(self, evaluator, job_id: str, patience_s: float = 30.0) -> None:
        """Stop the evaluation of ``job_id`` (its candidate, and a request's reference in its own
        judge), now or as soon as the evaluator has it: a daemon thread retries until the cancel
        lands, the job ends, or ``patience_s`` passes (the slot watchdog bounds the rest). The
        cancel is sent with the lock held, so the thread cannot have moved on to another job."""
        cancel_thread = getattr(evaluator, "cancel_thread", None)
        if cancel_thread is None:
            return

        def keep_trying() -> None:
            deadline = time.monotonic() + patience_s
            while time.monotonic() < deadline:
                with self._lock:
                    ident = self._threads.get(job_id)
                    if ident is None or cancel_thread(ident):
                        return
                time.sleep(0.1)

        threading.Thread(target=keep_trying, daemon=True, name=f"cancel-{job_id[:8]}").start()


def load_factory(spec: str):
    """``"module:callable"`` -> the callable."""
    module, _, attr = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"evaluator factory {spec!r} cannot be loaded: {e}") from e


def build_evaluator(spec: str, device: str, kwargs: Mapping[str, Any] | None):
    return load_factory(spec)(device=device, **dict(kwargs or {}))


def evaluator_info(evaluator, device: str) -> dict[str, Any]:
    """The evaluator's ``device_info()`` with the keys the scheduler reads filled in."""
    info = dict(evaluator.device_info()) if hasattr(evaluator, "device_info") else {}
    info.setdefault("device", device)
    info.setdefault(
        "device_name", info.get("name") or ("cpu (triton interpreter)" if device == "cpu" else device)
    )
    if not info.get("memory_bytes"):
        info["memory_bytes"] = info.get("total_memory") or CPU_BUDGET_BYTES
    return info


def worker_host_memory(device: str, configured: int | None = None,
                       device_memory_bytes: int | None = None) -> int:
    """Host memory the request code on one worker may hold, all its slots together
    (`ServiceConfig.host_memory_bytes`): ``configured``; else a CPU worker's device budget
    (``device_memory_bytes``, else `CPU_BUDGET_BYTES`); else a GPU worker's part of this host:
    `HOST_MEMORY_FRACTION` of its physical memory divided among its GPUs."""
    if configured:
        return int(configured)
    if device == "cpu":
        return int(device_memory_bytes or CPU_BUDGET_BYTES)
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return int(HOST_MEMORY_FRACTION * physical) // max(1, _gpus_on_host())


def start_evaluator(spec: str, device: str, kwargs: Mapping[str, Any] | None, slots: int,
                    host_memory_bytes: int) -> tuple[Any, dict[str, Any]]:
    """Build a worker's evaluator and give each of its ``slots`` an equal share of
    ``host_memory_bytes`` for the request code of one evaluation (the evaluator's
    ``limit_host_memory``); returns it with its info, ``slot_memory_bytes`` included (None for an
    evaluator that cannot bound memory: the requests' ``rss_limit_mb`` alone then applies)."""
    evaluator = build_evaluator(spec, device, kwargs)
    share: int | None = max(1, host_memory_bytes // max(1, slots))
    limit = getattr(evaluator, "limit_host_memory", None)
    if limit is None:
        log.warning("evaluator %s cannot bound the host memory of request code (no limit_host_memory): "
                    "each request's rss_limit_mb alone applies on %s", spec, device)
        share = None
    else:
        limit(share)
    return evaluator, {**evaluator_info(evaluator, device), "slot_memory_bytes": share}


def run_one(evaluator, request_json: str) -> tuple[str, str]:
    """Evaluate one request inside a worker: ``("result", EvalResult JSON)``, ``("reference_error",
    text)`` when the judge could not run the problem's reference (`JudgeError`), or ``("error",
    text)``. The evaluator returns a result for every bad solution; another exception is our own
    failure."""
    from drkernel.gym.config import EvalRequest

    try:
        return "result", evaluator.evaluate(EvalRequest.from_dict(json.loads(request_json))).to_json()
    except JudgeError as e:
        return "reference_error", public_first_line(e)
    except Exception as e:  # noqa: BLE001 - any exception here is an infrastructure failure, reported
        # The traceback stays in the worker's log; the job's error (which its client reads) gets
        # the exception's type and first line only.
        log.error("evaluation failed:\n%s", traceback.format_exc(limit=8))
        return "error", public_first_line(e)


def public_first_line(e: BaseException) -> str:
    """An exception's type and first line (at most 300 characters): what a job's error shows."""
    first = str(e).splitlines()[0][:300] if str(e) else ""
    return f"{type(e).__name__}: {first}"


def _worker_main(
    conn, spec: str, device: str, kwargs: Mapping[str, Any] | None, slots: int, tag: str,
    host_memory_bytes: int, parent: int,
) -> None:
    """Entry point of a worker process: build the evaluator (`start_evaluator`), then serve ``(key,
    request)`` messages. ``tag`` goes into the environment that its candidate children inherit, so
    the server can find and kill them if this process dies (`kill_tagged`). ``parent``: the server's
    pid; the worker dies with it (`die_with_parent`: a worker left behind by a server killed -9 would
    go on running its jobs beside the restarted server's), and its sandboxed children with the worker."""
    from drkernel.gym.orchestrator.sandbox import die_with_parent

    die_with_parent(parent)
    os.environ[WORKER_TAG_ENV] = tag
    try:
        evaluator, info = start_evaluator(spec, device, kwargs, slots, host_memory_bytes)
        conn.send(("ready", info))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which marks the device down
        conn.send(("start_failed", f"{type(e).__name__}: {e}"))
        return
    send_lock = threading.Lock()
    threads = JobThreads()

    def job(key: str, request_json: str) -> None:
        kind, payload = threads.run(evaluator, request_json, key)
        with send_lock:
            try:
                conn.send((kind, key, payload))
            except (OSError, ValueError, TypeError) as e:  # an answer that cannot travel is our failure
                try:
                    conn.send(("error", key, f"answer could not be sent: {type(e).__name__}"))
                except (OSError, ValueError):
                    pass  # the pipe is gone: the server sees EOF and fails the job

    with ThreadPoolExecutor(max_workers=slots) as pool:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                break
            if msg[0] == "stop":
                break
            if msg[0] == "cancel":
                threads.cancel(evaluator, msg[1])
                continue
            pool.submit(job, msg[1], msg[2])
    evaluator.close()


WORKER_TAG_ENV = "KERNELGYM_WORKER_TAG"


def kill_tagged(tag: str) -> int:
    """SIGKILL every process of this user whose environment carries ``tag`` (the candidates of a
    dead worker: they run in sessions of their own, so no process group reaches them, and the
    sandbox's die-with-parent may be absent). Returns how many were signalled."""
    needle = f"{WORKER_TAG_ENV}={tag}".encode() + b"\0"
    killed = 0
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle not in f.read() + b"\0":
                    continue
            os.kill(pid, signal.SIGKILL)
            killed += 1
        except (OSError, ValueError):
            continue
    return killed


class LocalWorker:
    """A device worker in a local process (spawned, so CUDA state never crosses a fork)."""

    def __init__(
        self,
        name: str,
        device: str,
        spec: str,
        kwargs: Mapping[str, Any] | None = None,
        slots: int = 2,
        start_timeout_s: float = 600.0,
        host_memory_bytes: int | None = None,
    ):
        self.name, self.device, self.spec, self.slots = name, device, spec, slots
        self.host_memory_bytes = host_memory_bytes or worker_host_memory(device)  # all slots together
        self.kwargs = dict(kwargs or {})
        self.start_timeout_s = start_timeout_s
        self._proc: mp.process.BaseProcess | None = None
        self._conn = None
        self._pending: dict[str, asyncio.Future] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seq = 0

    async def start(self) -> dict[str, Any]:
        self._loop = asyncio.get_running_loop()
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._tag = uuid.uuid4().hex
        self._proc = ctx.Process(
            target=_worker_main,
            args=(child, self.spec, self.device, self.kwargs, self.slots, self._tag, self.host_memory_bytes,
                  os.getpid()),
            name=f"kernelgym-{self.name}",
            daemon=True,
        )
        self._proc.start()
        child.close()
        self._conn = parent
        self._pending = {}
        ready = await asyncio.to_thread(self._await_ready)
        threading.Thread(
            target=self._reader,
            args=(parent, self._proc, self._pending, self._tag),
            daemon=True,
            name=f"kernelgym-{self.name}-reader",
        ).start()
        return ready

    def _await_ready(self) -> dict[str, Any]:
        if not self._conn.poll(self.start_timeout_s):
            self.kill()
            raise InfrastructureError(f"worker {self.name} did not start within {self.start_timeout_s:.0f} s")
        try:
            msg = self._conn.recv()
        except (EOFError, OSError):
            raise InfrastructureError(
                f"worker {self.name} died while starting (exit code {self._exitcode()})"
            )
        if msg[0] != "ready":
            raise InfrastructureError(f"worker {self.name} failed to start: {msg[1]}")
        return msg[1]

    def _exitcode(self):
        self._proc.join(timeout=1.0)
        return self._proc.exitcode

    def _reader(self, conn, proc, pending: dict[str, asyncio.Future], tag: str) -> None:
        """Thread: deliver answers to their futures; on EOF fail everything still pending on this
        process (a restarted worker has a new process and a new ``pending``)."""
        while True:
            try:
                kind, key, payload = conn.recv()
            except (EOFError, OSError):
                break
            self._loop.call_soon_threadsafe(self._deliver, pending, key, kind, payload)
        proc.join(timeout=2.0)
        if not proc.is_alive():  # its candidates do not outlive it
            kill_tagged(tag)
        err = f"worker {self.name} process lost (exit code {proc.exitcode})"
        self._loop.call_soon_threadsafe(self._fail_all, pending, err)

    def _deliver(self, pending: dict[str, asyncio.Future], key: str, kind: str, payload: str) -> None:
        fut = pending.pop(key, None)
        if fut is None or fut.done():
            return
        if kind == "result":
            fut.set_result(payload)
        else:
            fut.set_exception(answer_error(self.name, kind, payload))

    @staticmethod
    def _fail_all(pending: dict[str, asyncio.Future], err: str) -> None:
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(InfrastructureError(err))
        pending.clear()

    async def evaluate(self, request_json: str, job_id: str = "") -> str:
        if not self.alive:
            raise WorkerUnavailable(f"worker {self.name} is not running")
        self._seq += 1
        key = job_id or f"_{self._seq}"
        fut = self._loop.create_future()
        self._pending[key] = fut
        try:
            self._conn.send(("eval", key, request_json))
        except (OSError, ValueError) as e:
            self._pending.pop(key, None)
            raise WorkerUnavailable(f"worker {self.name} pipe broke: {e}") from e
        return await fut

    async def cancel(self, job_id: str) -> None:
        if job_id in self._pending and self.alive:
            try:
                self._conn.send(("cancel", job_id))
            except (OSError, ValueError):
                pass

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def kill(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()

    async def stop(self) -> None:
        if self._proc is None:
            return
        try:
            self._conn.send(("stop",))
        except (OSError, ValueError):
            pass
        await asyncio.to_thread(self._proc.join, 10.0)
        self.kill()

    def describe(self) -> dict[str, Any]:
        return {"backend": "local", "pid": self.pid, "host": os.uname().nodename}


def _one_gpu(name: str) -> bool:
    """Does ``name`` name one CUDA device by its index (``cuda:N``)?"""
    try:
        device = Device.parse(name)
    except ConfigError:
        return False
    return device.kind is DeviceKind.CUDA and device.index is not None


def local_devices(spec: str) -> list[str]:
    """Devices for local workers: ``auto`` (every visible GPU, else one CPU worker), ``cpu:N`` or a
    comma list (``cuda:0,cuda:1``)."""
    spec = spec.strip()
    if spec == "auto":
        n = _visible_gpus()
        return [f"cuda:{i}" for i in range(n)] if n else ["cpu"]
    if spec.startswith("cpu"):
        count = spec.partition(":")[2] or "1"
        if not count.isdigit() or int(count) < 1:
            raise ConfigError(f"devices={spec!r}: expected cpu:N with N >= 1")
        return ["cpu"] * int(count)
    devices = [d.strip() for d in spec.split(",") if d.strip()]
    bad = [d for d in devices if not _one_gpu(d)]
    if not devices or bad:
        raise ConfigError(f"devices={spec!r}: expected auto, cpu:N or a comma list of cuda:N (bad: {bad})")
    return devices


def local_workers(
    devices: str, spec: str, kwargs: Mapping[str, Any] | None, slots: int,
    host_memory_bytes: int | None = None, device_memory_bytes: int | None = None,
) -> list[LocalWorker]:
    """One `LocalWorker` per device of ``devices`` (see `local_devices`), each with its host memory
    (`worker_host_memory`)."""
    return [
        LocalWorker(f"{d.replace(':', '')}-{i}", d, spec, kwargs, slots,
                    host_memory_bytes=worker_host_memory(d, host_memory_bytes, device_memory_bytes))
        for i, d in enumerate(local_devices(devices))
    ]


def _gpus_on_host() -> int:
    """GPUs on this host, whatever this process is allowed to see (``/dev/nvidiaN``); 1 when none."""
    try:
        return max(1, len([d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()]))
    except OSError:
        return 1


def _visible_gpus() -> int:
    """GPUs visible to this host, counted without initialising CUDA in the server process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    try:
        return len([d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()])
    except OSError:
        return 0
