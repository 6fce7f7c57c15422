"""An in-memory `Evaluator` for unit tests: maps a marker found in the solution to a result."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from drkernel.gym import EvalRequest, EvalResult, Status


class TableEvaluator:
    """Returns the result whose marker occurs in the solution (first match), else INCORRECT."""

    def __init__(self, table: Mapping[str, Callable[[], EvalResult]]) -> None:
        self.table = dict(table)
        self.requests: list[EvalRequest] = []

    def evaluate(self, request: EvalRequest) -> EvalResult:
        self.requests.append(request)
        for marker, make in self.table.items():
            if marker in request.solution:
                r = make()
                r.problem_key, r.request_id = request.problem.key, request.request_id
                return r.finalize()
        return EvalResult(status=Status.INCORRECT, problem_key=request.problem.key).finalize()

    async def evaluate_batch(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        return [self.evaluate(r) for r in requests]

    def close(self) -> None:
        return None
