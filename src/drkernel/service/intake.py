"""From a validated request body to the gym's `EvalRequest`: which problem, on which device.

By default a server evaluates against the problem sets it loaded, named by key: a client sends
``problem_key`` and no code the server would run as the reference. Reference code from a request
is accepted only with ``allow_custom_problems``, and only for a key the server did not load: a
loaded key always means the server's problem. Such a problem is marked as the request's reference
(`mark_request_reference`), so the gym runs it in a judge of the evaluation's own, in the sandbox
with the candidate's limits, never in the judges every client shares.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from drkernel.gym.config import EvalRequest
from drkernel.gym.orchestrator.own_judge import mark_request_reference
from drkernel.problems.problem import Problem
from drkernel.service.admission import ReadersBusy, TooLargeForCpu, Unreadable, estimate_device_bytes
from drkernel.service.schemas import eval_config, valid_problem_key
from drkernel.service.store import NewJob


class Rejected(Exception):
    """A request the server will not run: HTTP ``code``, an error name, the field at fault."""

    def __init__(self, code: int, error: str, loc: tuple[str | int, ...], message: str):
        super().__init__(message)
        self.code, self.error, self.loc, self.message = code, error, loc, message


class ProblemCatalog:
    """The problems a server loaded, by key."""

    def __init__(self, problems: Sequence[Problem] = ()):
        self.by_key = {p.key: p for p in problems}

    @classmethod
    def load(cls, spec: str) -> "ProblemCatalog":
        """``spec``: comma list of `load_problems` specs (``builtin``, a folder, a .jsonl); empty: none."""
        from drkernel.problems import load_problems

        problems: list[Problem] = []
        for part in (s.strip() for s in spec.split(",")):
            if part:
                problems.extend(load_problems(part))
        return cls(problems)


def _problem(body: Any, catalog: ProblemCatalog, allow_custom: bool, where: tuple) -> Problem:
    key = body.problem_key or (body.problem and f"{body.problem.source}/L{body.problem.level}/{body.problem.name}")
    if not key:
        raise Rejected(422, "invalid_request", (*where, "problem_key"), "problem_key is required")
    if not valid_problem_key(key):
        raise Rejected(422, "invalid_request", (*where, "problem_key"), "not a problem key (source/L<level>/name)")
    loaded = catalog.by_key.get(key)
    if loaded is not None:
        if body.problem is not None and Problem.from_dict(body.problem.model_dump()).code_hash != loaded.code_hash:
            raise Rejected(422, "problem_mismatch", (*where, "problem"),
                           f"{key} is loaded by the server with other reference code; send the key alone")
        return loaded
    if body.problem is None:
        raise Rejected(422, "unknown_problem", (*where, "problem_key"), f"the server has no problem {key}")
    if not allow_custom:
        raise Rejected(403, "custom_problems_disabled", (*where, "problem"),
                       "this server evaluates only the problems it loaded (no --allow-custom-problems)")
    sent = body.problem.model_dump()
    problem = Problem.from_dict({**sent, "metadata": mark_request_reference(sent.get("metadata") or {})})
    if body.problem_key is not None and body.problem_key != problem.key:
        raise Rejected(422, "invalid_request", (*where, "problem_key"), "problem_key differs from the problem's key")
    return problem


def check_device(device: str, served: Sequence[str], where: tuple) -> None:
    """A request's ``config.device`` must be one the server's workers run (``auto`` always is)."""
    if device == "auto" or device in served:
        return
    if device == "cuda" and any(d.startswith("cuda") for d in served):
        return
    raise Rejected(422, "device_unavailable", (*where, "config", "device"),
                   f"no worker runs {device!r} (this server runs {sorted(set(served)) or 'none'})")


def to_request(body: Any, catalog: ProblemCatalog, allow_custom: bool, served: Sequence[str],
               where: tuple = ("body",)) -> EvalRequest:
    """The gym request for a validated body; raises `Rejected` (and `ConfigError` for a
    cross-field config rule, such as ``timed_calls_max`` below ``timed_calls``)."""
    problem = _problem(body, catalog, allow_custom, where)
    config = eval_config(body.config)
    check_device(config.device, served, where)
    return EvalRequest(problem=problem, solution=body.solution, config=config, request_id=body.request_id,
                       language=body.language)


def admitted(job: NewJob, request: EvalRequest, where: tuple = ("body",),
             served: Sequence[str] = ()) -> NewJob:
    """``job`` with its estimated device bytes on the workers' devices ``served``; `Rejected` (422) for
    problem code admission cannot read (`admission.Unreadable`), and for an unscaled request too large for a
    CPU worker (`admission.TooLargeForCpu`); 429 while the client may not start another reading child."""
    try:
        return replace(job, est_bytes=estimate_device_bytes(request, served, job.client))
    except Unreadable as e:
        raise Rejected(422, "invalid_problem", (*where, "problem", "code"), str(e)) from None
    except TooLargeForCpu as e:
        raise Rejected(422, "too_large_for_cpu", (*where, "config", "cpu_scale"), str(e)) from None
    except ReadersBusy as e:
        raise Rejected(429, "admission_busy", (*where, "problem", "code"), str(e)) from None
