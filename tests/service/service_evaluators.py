"""A small deterministic evaluator for tests of the service's API, store and scheduler, where the gym
itself is not the thing under test. It computes a real `EvalResult` from the request; directives in
the solution source steer it:

    # sleep: 0.05      take this long
    # status: incorrect  report this status
    # raise            raise (an infrastructure failure: the evaluator itself broke)
    # die              kill the worker process (a lost worker)
    # reference_error  raise `JudgeError` (the problem's reference failed)

A file at ``broken_marker`` makes every result without a status directive incorrect (a faulted
device: the canary fails). ``started_marker``: a file created when an evaluator is built.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from drkernel.errors import JudgeError
from drkernel.gym.config import EvalRequest
from drkernel.gym.result import EvalResult, Status

_DIRECTIVE = re.compile(r"^#\s*(sleep|status|raise|die|reference_error)\b:?\s*(\S*)", re.M)


class DirectiveEvaluator:
    def __init__(self, device: str = "cpu", broken_marker: str | None = None, delay_s: float = 0.0,
                 started_marker: str | None = None):
        if started_marker:
            Path(started_marker).touch()
        self.device = device
        self.broken_marker = broken_marker
        self.delay_s = delay_s
        self.pid = os.getpid()

    def device_info(self) -> dict:
        return {
            "device": self.device,
            "device_name": "directive test device",
            "memory_bytes": 8 << 30,
            "pid": self.pid,
        }

    def evaluate(self, request: EvalRequest) -> EvalResult:
        directives = dict(_DIRECTIVE.findall(request.solution))
        time.sleep(float(directives.get("sleep") or self.delay_s))
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
