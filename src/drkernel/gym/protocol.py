"""The `Evaluator` interface. The in-process evaluator (`drkernel.gym.InProcessEvaluator`) and the
service client (`drkernel.service.client.ServiceEvaluator`) both implement it, so the agent and the
trainer do not care which one they hold."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from drkernel.gym.config import EvalRequest
from drkernel.gym.result import EvalResult


@runtime_checkable
class Evaluator(Protocol):
    def evaluate(self, request: EvalRequest) -> EvalResult:
        """Evaluate one solution; a bad solution is a result, never an exception."""
        ...

    async def evaluate_batch(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        """Evaluate many solutions concurrently; results in request order."""
        ...

    def close(self) -> None:
        """Release processes and connections."""
        ...
