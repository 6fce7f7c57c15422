"""The static checks in a child process, where a job's deadline and a cancel reach them.

The static checks read the solution's source (untrusted, up to the service's size limit) in pure
Python; some shapes of source cost far more than others, and a thread cannot be stopped from
outside. So each evaluation hands its source to a checker child and waits for the answer with its
deadline (the request's ``timeout_s``) and its cancellation: either kills the child, and the
evaluation ends there (`StaticTimeout`, or `WaitCancelled` as any cancelled wait does). A child
that answered is kept for the next evaluation (`IDLE_CHILDREN`), so an evaluation pays no start.

The parent sends the checks (pickled: our own objects, parent to child only) once, then per job the
source and the problem; the child answers one JSON header per job (`drkernel.gym.ipc.Channel`)::

    parent: checks <pickled registry.static>
    (parent: check <pickled (source, problem)>   child: found hacks=[...] blocked=... | error text=...)*

The parent never unpickles what the child sends.
"""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import threading
import time
from dataclasses import asdict, fields
from typing import Any, Callable, ContextManager, Sequence

from drkernel.errors import InfrastructureError
from drkernel.gym.ipc import Channel, ChannelClosed, ChannelTimeout, ProtocolViolation
from drkernel.gym.orchestrator.runtime import WaitCancelled
from drkernel.gym.result import Hack

log = logging.getLogger(__name__)

IDLE_CHILDREN = 4
"""Checker children kept between evaluations (one per evaluation running at once is enough)."""
START_TIMEOUT_S = 60.0
"""How long a checker child may take to start and take the checks (our cost, not the request's)."""
_HACK_FIELDS = {f.name: f.type for f in fields(Hack)}
_CHILD = "from drkernel.gym.orchestrator.static_child import main; main()"


class StaticTimeout(Exception):
    """The static checks did not finish within the request's ``timeout_s``."""


class _Checker:
    """One checker child and its channel; ``cancel()`` kills it (a `Cancellation` part)."""

    def __init__(self, payload: bytes) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.channel = Channel(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        self.channel.send({"op": "checks"}, payload)
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.proc.kill()

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()  # the channel's descriptors
        self.proc.stdout.close()


class StaticChecks:
    """Runs ``checks`` (a registry's static checks) in checker children; see the module docstring."""

    def __init__(self, checks: Sequence[Any]) -> None:
        self.checks = tuple(checks)
        self._payload = pickle.dumps(self.checks)
        self._idle: list[_Checker] = []
        self._lock = threading.Lock()

    def run(self, source: str, problem: Any, timeout_s: float,
            joined: Callable[[Any], ContextManager[Any]]) -> tuple[list[Hack], bool]:
        """The hacks found and whether a blocking check found any. ``joined``: the evaluation's
        cancellation context (`InProcessEvaluator._cancellable`). Raises `StaticTimeout` past
        ``timeout_s``, `WaitCancelled` when the evaluation is cancelled."""
        if not self.checks:
            return [], False
        with self._lock:
            checker = self._idle.pop() if self._idle else None
        checker = checker or _Checker(self._payload)
        answer: dict[str, Any] | None = None
        try:
            with joined(checker):
                answer = self._ask(checker, source, problem, timeout_s)
        finally:
            self._keep(checker, answered=answer is not None)
        if "error" in answer:
            raise InfrastructureError(f"the static checks failed: {answer['error']}")
        return _hacks(answer), bool(answer.get("blocked"))

    def _ask(self, checker: _Checker, source: str, problem: Any, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + max(0.0, timeout_s)
        try:
            checker.channel.send({"op": "check"}, pickle.dumps((source, problem)))
            return checker.channel.recv(deadline=deadline).header
        except ChannelTimeout:
            raise StaticTimeout(f"the static checks did not finish within timeout_s ({timeout_s:g} s)") from None
        except ChannelClosed:
            if checker.cancelled:
                raise WaitCancelled("the evaluation was cancelled during its static checks") from None
            raise InfrastructureError(f"the static checks' process ended ({checker.proc.poll()})") from None

    def _keep(self, checker: _Checker, answered: bool) -> None:
        """Keep a child that answered (and lives) for the next evaluation; close any other."""
        with self._lock:
            if answered and not checker.cancelled and checker.proc.poll() is None and len(self._idle) < IDLE_CHILDREN:
                self._idle.append(checker)
                return
        checker.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for checker in idle:
            checker.close()


def _hacks(answer: dict[str, Any]) -> list[Hack]:
    """The child's hacks, each field checked against `Hack`'s."""
    out = []
    for h in answer.get("hacks") or ():
        if not isinstance(h, dict) or set(h) != set(_HACK_FIELDS):
            raise ProtocolViolation("a malformed hack from the static checks' process")
        out.append(Hack(**h))
    return out


def _serve(channel: Channel) -> None:
    checks = pickle.loads(channel.recv().blob)  # our parent's, never a peer's
    while True:
        try:
            msg = channel.recv()
        except ChannelClosed:
            return
        source, problem = pickle.loads(msg.blob)
        hacks: list[Hack] = []
        blocked = False
        try:
            for check in checks:
                found = check.check(source, problem)
                hacks.extend(found)
                blocked = blocked or (bool(found) and check.blocking)
        except Exception as e:  # noqa: BLE001 - our checks' failure, reported to the evaluation
            log.exception("static check failed")
            channel.send({"op": "error", "error": f"{type(e).__name__}: {str(e)[:300]}"})
            continue
        channel.send({"op": "found", "hacks": [asdict(h) for h in hacks], "blocked": blocked})


def main() -> None:
    """A checker child's entry (`_CHILD`): its stdin and stdout are the channel."""
    from drkernel.gym.ipc import adopt_stdio_channel, child_channel

    adopt_stdio_channel()
    _serve(child_channel())
