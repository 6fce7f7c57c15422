"""A judge of its own for a reference that came with the request (the service's custom problems).

The device's judges are long-lived and shared: every client's trials are compared there, their
reference models and outputs stay in their memory. A reference the server loaded is trusted to run
there; a reference a client sent is request code, like a solution, and in a shared judge it could
rebind the judge's comparison for other clients' solutions, read their references from memory, hang
the judge, or hold its memory. So such a reference gets a judge process of its own for one
evaluation (`OwnJudge`): the candidate's sandbox and limits (`CANDIDATE_LIMITS`: CPU time,
processes), its host memory watched against the request's ``rss_limit_mb`` (or, where smaller, its
half of the worker's share per evaluation: `InProcessEvaluator.limit_host_memory`), every call bounded by the
request's ``timeout_s``, discarded when the evaluation ends. What goes wrong in it (it died, hung past
the timeout, passed the memory limit) is the reference's failure, a `JudgeError`, never retried as
ours. The price is one judge start per such evaluation (an interpreter with torch, and on a GPU a
CUDA context).

A request for a full-size reference on CPU (``cpu_scale=False``) gets one too (`needs_own_judge`): its
reference is trusted, but seconds of its work per trial in a shared judge would hold every other
client's comparisons. A problem is marked by the side that accepted its code (`mark_request_reference`, in the service's
intake): the mark is the problem's metadata, set after the client's fields, so a client cannot clear it.
"""

from __future__ import annotations

import os
import signal
from typing import Any, Mapping

from drkernel.errors import JudgeError
from drkernel.gym.orchestrator.memory import RssWatch
from drkernel.gym.orchestrator.pool import Child
from drkernel.gym.ipc import REFERENCE_HEADER, ProtocolViolation
from drkernel.gym.orchestrator.runtime import JudgeLost, JudgeSlot
from drkernel.gym.orchestrator.sandbox import CANDIDATE_LIMITS

REQUEST_REFERENCE = "reference_from_request"  # the metadata key: True when the reference is request code
JUDGE_MODULE = "drkernel.gym.judge"


def is_request_reference(problem: Any) -> bool:
    """Whether ``problem``'s reference came with a request (it then runs in an `OwnJudge`)."""
    return (getattr(problem, "metadata", None) or {}).get(REQUEST_REFERENCE) is True


def needs_own_judge(request: Any, on_cuda: bool) -> bool:
    """Whether an evaluation gets a judge of its own: its reference came with the request, or it asks
    for the reference at full size on CPU (``cpu_scale=False``). A full-size reference in the CPU
    interpreter's judge is seconds of work per trial; in the shared judge every other client's
    comparisons waited behind it (hostile round 10: another client's 0.6-s job took 7.7-11.6 s)."""
    return is_request_reference(request.problem) or (not on_cuda and not request.config.cpu_scale)


def mark_request_reference(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """``metadata`` with the mark set (whatever the client sent under that key)."""
    return {**metadata, REQUEST_REFERENCE: True}


class OwnJudge(JudgeSlot):
    """A fresh judge for one evaluation of a request's reference; `close` when the evaluation ends."""

    MAX_HEADER = REFERENCE_HEADER  # the reference's code runs in it and can write on its channel

    def __init__(self, runtime: Any, timeout_s: float, rss_limit_bytes: int,
                 limit_source: str = "the request's rss_limit_mb") -> None:
        super().__init__(-1, lambda: Child(JUDGE_MODULE, runtime.device, runtime.env, runtime.runner,
                                           CANDIDATE_LIMITS))
        self.timeout_s = timeout_s
        self.limit_source = limit_source  # what set the memory limit, for the error that names it
        try:
            self.child.wait_ready()
        except BaseException:
            self.child.discard()
            raise
        self.watch = RssWatch(self.child.pid, rss_limit_bytes).__enter__()

    def call(self, header: dict[str, Any], blob: bytes, timeout_s: float, fds: list[int] | None) -> dict:
        try:
            return super().call(header, blob, min(timeout_s, self.timeout_s), fds)
        except JudgeLost as e:
            if self.watch.fired:
                why = f"passed its memory limit ({self.watch.limit >> 20} MiB: {self.limit_source})"
            elif isinstance(e.__cause__, ProtocolViolation):
                why = "broke the judge's protocol"
            else:
                why = f"died or did not answer within {self.timeout_s:g} s"
            raise JudgeError(f"the request's reference {why} in its own judge: {e}") from e

    def cancel(self) -> None:
        """Kill the judge now (its evaluation was cancelled): the call waiting on it, or the next one,
        ends as the reference's failure at once. Only the process is signalled, never our end of
        the channel, which the evaluation's thread may be reading; that thread discards the child."""
        if self.child.alive():  # not yet reaped, so the pid (and its session's group) is still ours
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def restart(self) -> None:
        """No second judge: the evaluation ends with the reference's failure."""
        self.child.kill()

    def close(self) -> None:
        self.watch.__exit__()
        if self.child.alive():
            self.shutdown()
        else:
            self.child.discard()
