"""A small deterministic evaluator for tests of the service's API, store and scheduler, where the gym
itself is not the thing under test. It computes a real `EvalResult` from the request; directives in
the solution source steer it:

    # sleep: 0.05      take this long (a cancel ends it early)
    # hang: 30         take this long whatever happens (a worker that no cancel reaches)
    # status: incorrect  report this status
    # raise            raise (an infrastructure failure: the evaluator itself broke)
    # die              kill the worker process (a lost worker)
    # reference_error  raise `JudgeError` (the problem's reference failed)
    # killed: reference_error  when a cancel ends the sleep, raise `JudgeError` (a custom reference's
                       own judge killed with the job) instead of a crashed result

A file at ``broken_marker`` makes every result without a status directive incorrect (a faulted
device: the canary fails). ``started_marker``: a file created when an evaluator is built.

``cancel_thread(ident)`` ends the sleep of the evaluation that thread runs with a crashed result, as
the gym's kill of a candidate does (a cancelled or preempted job).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from pathlib import Path

from drkernel.errors import JudgeError
from drkernel.gym.config import EvalRequest
from drkernel.gym.result import EvalResult, Status

_DIRECTIVE = re.compile(r"^#\s*(sleep|hang|status|raise|die|reference_error|killed)\b:?\s*(\S*)", re.M)


class DirectiveEvaluator:
    def __init__(self, device: str = "cpu", broken_marker: str | None = None, delay_s: float = 0.0,
                 started_marker: str | None = None):
        if started_marker:
            Path(started_marker).touch()
        self.device = device
        self.broken_marker = broken_marker
        self.delay_s = delay_s
        self.pid = os.getpid()
        self._sleeps: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def device_info(self) -> dict:
        return {
            "device": self.device,
            "device_name": "directive test device",
            "memory_bytes": 8 << 30,
            "pid": self.pid,
        }

    def cancel_thread(self, ident: int) -> bool:
        """Kill the evaluation thread ``ident`` runs; False when it runs none (yet)."""
        with self._lock:
            killed = self._sleeps.get(ident)
        if killed is not None:
            killed.set()
        return killed is not None

    def _sleep(self, seconds: float) -> bool:
        """Sleep; True when a cancel ended it."""
        killed = threading.Event()
        with self._lock:
            self._sleeps[threading.get_ident()] = killed
        try:
            return killed.wait(seconds)
        finally:
            with self._lock:
                del self._sleeps[threading.get_ident()]

    def evaluate(self, request: EvalRequest) -> EvalResult:
        directives = dict(_DIRECTIVE.findall(request.solution))
        if "hang" in directives:
            time.sleep(float(directives["hang"]))
        if self._sleep(float(directives.get("sleep") or self.delay_s)):
            if directives.get("killed") == "reference_error":
                raise JudgeError("judge lost during 'prepare': peer closed the pipe")
            return EvalResult(status=Status.CRASHED, problem_key=request.problem.key, request_id=request.request_id,
                              device=self.device, error="killed (cancelled)").finalize()
        if "raise" in directives:
            raise RuntimeError("directive evaluator told to raise")
        if "die" in directives:
            os._exit(17)
        if "reference_error" in directives:
            raise JudgeError("judge failed on 'prepare': ValueError: the reference raised")
        digest = hashlib.sha256(request.solution.encode()).hexdigest()
        if "status" in directives:
            status = Status(directives["status"])
        elif self.broken_marker and Path(self.broken_marker).exists():
            status = Status.INCORRECT
        else:
            status = Status.CORRECT if "class ModelNew" in request.solution else Status.NO_MODELNEW
        return EvalResult(
            status=status,
            problem_key=request.problem.key,
            request_id=request.request_id,
            device=self.device,
            device_name="directive test device",
            speedup=int(digest[:6], 16) / 2**24 * 3,
            solution_hash=digest,
            config=request.config.to_dict(),
        ).finalize()

    async def evaluate_batch(self, requests):
        return [self.evaluate(r) for r in requests]

    def close(self) -> None:
        pass
