"""Child processes (judge and candidates) and the warm pool of candidates.

A child is ``python -m <module>`` started by a `Runner` (the bwrap sandbox, `drkernel.gym.orchestrator.sandbox`)
in its own session, talking over a private Unix socket handed over as its stdin and stdout (its
boot moves it onto fresh descriptors; nothing names them in its environment), with stderr going to a
pipe whose last bytes are kept in memory (`childlog`: no host file) and explain crashes. The pool
keeps ``size`` candidates started and warm (torch and triton imported, CUDA initialised) so a
solution does not wait for start-up; each is handed out once, then discarded.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from typing import Any, Callable

from drkernel.errors import InfrastructureError
from drkernel.gym.ipc import MAX_BLOB, MAX_HEADER, Channel, ChannelClosed, ChannelTimeout, Message, channel_pair
from drkernel.gym.messages import Op, Signal
from drkernel.gym.orchestrator.childlog import ChildLog
from drkernel.gym.orchestrator.sandbox import CANDIDATE_LIMITS, Limits, Runner, Spawn
from drkernel.gym.orchestrator.sandbox import child_env as sandbox_env

log = logging.getLogger(__name__)
START_TIMEOUT_S = 300.0
LOG_TAIL = 16000


Gate = Callable[["Talker", float], Message]
"""Lets a started candidate go (``go``) and returns its next message (``ready``) by the deadline, holding
the device as the gate decides: `runtime.WarmUpGate` (its shared hold)."""


def let_go(child: "Talker", deadline: float) -> Message:
    """The gate of a child that shares its device with nothing timed (CPU, tests)."""
    child.send(Signal(Op.GO).to_header())
    return child.recv(deadline)


class Talker:
    """What a fresh `Child` and a zygote's fork share: their channel's two calls, their log, and being
    stopped while they wait for the device."""

    channel: Channel
    log: ChildLog
    pid: int

    def alive(self) -> bool:
        raise NotImplementedError

    def stop(self) -> None:
        """SIGSTOP the child and every process below it: none of its threads runs (or launches device
        work) until `resume`. Nothing once it has exited (its pid may name another process by then)."""
        if self.alive():
            signal_tree(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.alive():
            signal_tree(self.pid, signal.SIGCONT)

    def send(self, header: dict, blob: bytes = b"", fds: list[int] | None = None) -> None:
        self.channel.send(header, blob, fds or ())

    def recv(self, deadline: float | None = None, max_fds: int = 0,
             max_blob: int | Callable[[], int] = MAX_BLOB, max_header: int = MAX_HEADER) -> Message:
        return self.channel.recv(deadline, max_fds, max_blob, max_header)

    def log_tail(self, n: int = LOG_TAIL) -> str:
        """The last ``n`` bytes of its output (stderr and stdout), which explain a crash."""
        return self.log.tail(n)


class Child(Talker):
    """One child process and its message channel, started by a `Runner` (the sandbox)."""

    def __init__(self, module: str, device: str, env: dict[str, str], runner: Runner,
                 limits: Limits = CANDIDATE_LIMITS) -> None:
        ours, theirs = channel_pair()  # one Unix socket: a staging buffer's descriptor can travel on it
        self.log = ChildLog()
        self.runner = runner
        self.private_dir = runner.private_dir()  # the child's writable dir, as the child sees it
        child_env = sandbox_env(env, private=self.private_dir, sandboxed=runner.sandboxed)
        child_env["DRKERNEL_DEVICE"] = device
        if device == "cpu":
            child_env["TRITON_INTERPRET"] = "1"
        else:
            child_env.pop("TRITON_INTERPRET", None)
        self.started = time.monotonic()
        try:
            # the channel travels as stdin/stdout; the child's boot moves it off them
            self.proc = runner.popen(Spawn(module, child_env, stdin=theirs, stdout=theirs,
                                           stderr=self.log.writer, limits=limits, gpu=device != "cpu"))
        except BaseException:
            os.close(ours)
            self.log.close()
            raise
        finally:
            os.close(theirs)
            self.log.close_writer()
        self.channel = Channel(ours)
        self.hello: dict = {}
        self.start_s: float | None = None
        self.inner: list[int] = []  # the runner's processes below ours (bwrap's init), seen at ready

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S, gate: Gate = let_go) -> dict:
        """Wait for ``ready``. A child that first asks to ``init`` (a candidate, before it touches the
        device) is let go through ``gate``: under the device's shared hold, so that no child creates
        its CUDA context or launches its warm-up kernel while a timed region holds the device."""
        deadline = time.monotonic() + timeout_s
        try:
            msg = self.channel.recv(deadline)
            if msg.op == Op.INIT:
                msg = gate(self, deadline)
        except (ChannelClosed, ChannelTimeout) as e:
            self.kill()
            raise InfrastructureError(f"child {self.proc.args[-1]} did not start: {e}\n{self.log_tail()}") from e
        if msg.op != Op.READY:
            self.kill()
            raise InfrastructureError(f"child sent {msg.op!r} instead of ready")
        self.hello = msg.header
        self.inner = _children(self.proc.pid)
        self.start_s = time.monotonic() - self.started
        return self.hello

    @property
    def returncode(self) -> int | None:
        """The child's exit status as Popen reports it (negative: killed by that signal), also when a
        sandbox in between turned a signal into an exit code."""
        rc = self.proc.returncode
        return self.runner.exit_status(rc) if rc is not None else None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the child to exit on its own; True if it did."""
        try:
            self.proc.wait(timeout=timeout_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self) -> None:
        """Kill the child and everything it started, and return once they are gone. Under the sandbox
        the processes inside left our process group (``--new-session``); killing bwrap kills its
        init through ``--die-with-parent``, and the init's exit tears down the pid namespace, so we
        wait for the init (bwrap's child) too, not only for bwrap."""
        inner = sorted(set(self.inner) | set(_children(self.proc.pid)))  # bwrap may already have exited
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("child %d did not exit after SIGKILL", self.proc.pid)
        if not _wait_gone(inner, time.monotonic() + 10):
            log.warning("processes %s of child %d outlived it", inner, self.proc.pid)
        self.channel.close()

    def discard(self) -> None:
        self.kill()
        self.log.close()
        if not self.runner.sandboxed:  # a host temp dir (the sandbox's own tmpfs went with the child)
            shutil.rmtree(self.private_dir, ignore_errors=True)


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (empty when it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        return []


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``, forked by any of its threads (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(c) for c in f.read().split()]
            except (OSError, ValueError):
                continue
            found += kids
            todo += kids
    return found


def signal_tree(root: int, sig: int, rounds: int = 16, settle_s: float = 2.0) -> int:
    """Send ``sig`` to ``root`` and every process below it; returns how many were signalled. For
    SIGSTOP it waits until every thread of each is stopped (delivery is asynchronous) and walks the
    tree again until it finds no process it has not stopped yet, so a process forked while the tree
    was being stopped is caught too (a stopped process forks no more). Processes that are gone are
    skipped; a thread still running after ``settle_s`` (in an uninterruptible wait) stops on its way
    back to user space."""
    if root <= 0:
        return 0
    done: set[int] = set()
    for _ in range(rounds):
        new = [p for p in [root, *descendants(root)] if p not in done]
        if not new:
            break
        for p in new:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, sig)
        done.update(new)
        if sig != signal.SIGSTOP:
            break
        deadline = time.monotonic() + settle_s
        while not all(is_stopped(p) for p in new) and time.monotonic() < deadline:
            time.sleep(0.0005)
    return len(done)


def _state(stat_path: str) -> str | None:
    """The state letter of a ``/proc/.../stat`` file (R, S, D, T, Z, ...); None when it is gone."""
    try:
        with open(stat_path) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def is_stopped(pid: int) -> bool:
    """Every thread of ``pid`` is stopped (or the process is gone)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all(_state(f"/proc/{pid}/task/{tid}/stat") in (None, "T", "t", "Z", "X") for tid in tasks)


def _wait_gone(pids: list[int], deadline: float) -> bool:
    """Wait until every pid has exited (a zombie counts: it runs nothing); False at the deadline."""
    left = list(pids)
    while left:
        left = [p for p in left if _state(f"/proc/{p}/stat") not in (None, "Z")]
        if left and time.monotonic() > deadline:
            return False
        if left:
            time.sleep(0.01)
    return True


class WarmPool:
    """``size`` candidate children kept started and warm; ``take`` hands one out for one use.
    ``spawn`` makes one (default: a fresh `Child`; a `Zygote`'s ``fork`` where there is one)."""

    def __init__(self, device: str, size: int, env: dict[str, str], runner: Runner, gate: Gate = let_go,
                 spawn: Callable[[], Any] | None = None) -> None:
        self.device = device
        self.runner = runner
        self.size = size
        self.env = env
        self.gate = gate
        self.spawn = spawn or (lambda: Child("drkernel.gym.candidate", self.device, self.env, self.runner))
        self._ready: list[Child] = []
        self._starting = 0
        self._closed = False
        self._cond = threading.Condition()
        for _ in range(size):
            self._start_one()

    def _start_one(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._starting += 1
        threading.Thread(target=self._fill, name="candidate-start", daemon=True).start()

    def _fill(self) -> None:
        """Start one warm candidate. A refill still starting when the pool closes is cut short by the
        close that follows (the runtime closes the zygote next, and its forks die with it): that is
        expected, logged at debug, not an error."""
        child = None
        try:
            child = self.spawn()
            child.wait_ready(gate=self.gate)
        except Exception as e:  # recorded; take() starts one in the foreground and raises if that fails too
            if self.closed:
                log.debug("warm candidate cut short by the pool's close: %s", str(e).splitlines()[0])
            else:
                log.error("warm candidate failed to start: %s", e)
            if child is not None:
                child.discard()
            child = None
        with self._cond:
            self._starting -= 1
            if child is not None and self._closed:
                child.discard()
            elif child is not None:
                self._ready.append(child)
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        with self._cond:
            return self._closed

    def give(self, child: Child) -> None:
        """Add a child started elsewhere (ready) to the warm ones."""
        with self._cond:
            if self._closed:
                child.discard()
                return
            self._ready.append(child)
            self._cond.notify_all()

    def take(self) -> Child:
        """A warm candidate (waits for one starting, or starts one if none is on its way)."""
        while True:
            with self._cond:
                while not self._ready and self._starting > 0 and not self._closed:
                    self._cond.wait()
                if self._closed:
                    raise InfrastructureError("the pool is closed")
                child = self._ready.pop(0) if self._ready else None
            if child is None:
                child = self.spawn()
                child.wait_ready(gate=self.gate)
            if self.size:
                self._start_one()
            if child.alive():
                return child
            child.discard()

    @property
    def ready_count(self) -> int:
        return len(self._ready)

    def close(self) -> None:
        """Discard the warm children; refills still starting discard theirs when they end."""
        with self._cond:
            self._closed = True
            ready, self._ready = self._ready, []
            self._cond.notify_all()
        for child in ready:
            child.discard()
