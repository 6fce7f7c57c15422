"""Pydantic models of the HTTP API (the edge: the gym's own types are plain dataclasses)."""

from __future__ import annotations

import dataclasses
import json
import re
import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union, get_args, get_origin, get_type_hints

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StringConstraints,
    create_model,
    model_validator,
)

from drkernel.gym.config import (
    LANGUAGES,
    REFERENCE_MODES,
    TIMING_RULES,
    TOLERANCE_PROFILES,
    VERDICT_MODES,
    EvalConfig,
)
from drkernel.service.admission import DTYPE_BYTES
from drkernel.service.config import ServiceConfig
from drkernel.service.store import Job


class _Strict(BaseModel):
    """A body object: strict, no unknown keys. An object with more keys than the model has fields holds
    an unknown one, so it is refused whole, before any key is looked at: half a million unknown keys
    cost one error, not one each."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _few_keys(cls, data: Any) -> Any:
        if isinstance(data, dict) and len(data) > len(cls.model_fields):
            raise ValueError(f"{len(data)} keys where {cls.__name__} has {len(cls.model_fields)} fields; "
                             f"known: {sorted(cls.model_fields)}")
        return data


def at_most(limit: int) -> BeforeValidator:
    """A dict or list refused by its length before its items are validated (a ``max_length`` bound
    applies after them: a million bad items would each build an error first)."""

    def check(value: Any) -> Any:
        if isinstance(value, (dict, list)) and len(value) > limit:
            raise ValueError(f"at most {limit} items (this one has {len(value)})")
        return value

    return BeforeValidator(check)


KEY_PART = r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}"
PROBLEM_KEY = rf"^{KEY_PART}/L[1-4]/{KEY_PART}$"
_KEY_RE = re.compile(PROBLEM_KEY)
_SEED_MAX = 2**32 - 1


def valid_problem_key(key: str) -> bool:
    """``source/L{level}/name`` of plain name parts (no ``..``, no slashes inside a part)."""
    return bool(_KEY_RE.match(key)) and ".." not in key


def _config_bounds(limits: ServiceConfig) -> dict[str, dict[str, Any]]:
    """Bounds of every `EvalConfig` field at the API (a field missing here fails `config_model`).
    Upper bounds that cost the server resources come from the server's configuration."""
    calls = limits.max_timed_calls
    return {
        "trials": dict(ge=1, le=limits.max_trials),
        "tolerance": dict(choices=tuple(TOLERANCE_PROFILES)),
        "device": dict(pattern=r"^(auto|cpu|cuda|cuda:[0-9]{1,3})$"),
        "seed": dict(ge=0, le=_SEED_MAX),
        "timing": {},
        "warmup_calls": dict(ge=0, le=calls),
        "timed_calls": dict(ge=1, le=calls),
        "l2_flush": {},
        "head_start_max_ms": dict(ge=0.0, le=1000.0),
        "timed_calls_max": dict(ge=0, le=calls),
        "timing_target_rse": dict(gt=0.0, le=1.0),
        "timing_budget_ms": dict(ge=0.0, le=60_000.0),
        "timed_calls_min": dict(ge=1, le=calls),
        "timing_rule": dict(choices=TIMING_RULES),
        "timing_precision": dict(gt=0.0, lt=1.0),
        "timed_predraw": {},
        "reference": dict(choices=REFERENCE_MODES),
        "profile": {},
        "timeout_s": dict(gt=0.0, le=limits.max_timeout_s),
        "memory_fraction": dict(gt=0.0, le=1.0),
        "rss_limit_mb": dict(ge=64, le=limits.max_rss_limit_mb),
        "verdict_mode": dict(choices=VERDICT_MODES),
        "coverage_floor": dict(ge=0.0, le=1.0),
        "strict_allowlist": dict(max_length=256),
        "cpu_scale": {},
        "cpu_element_budget": dict(ge=1, le=1 << 26),
        "second_size": {},
    }


def _api_type(hint: Any, bounds: dict[str, Any]) -> Any:
    """The pydantic type of a dataclass field: strict, bounded; tuples travel as JSON lists."""
    choices = bounds.pop("choices", None)
    if choices is not None:
        return Literal[choices]
    if get_origin(hint) in (Union, types.UnionType) and type(None) in get_args(hint):
        (inner,) = [a for a in get_args(hint) if a is not type(None)]
        return Optional[_api_type(inner, bounds)]  # None: the gym draws it (e.g. secret seeds)
    if hint is bool:
        return StrictBool
    if get_origin(hint) is tuple:
        return Annotated[list[Annotated[str, StringConstraints(max_length=256)]], Field(**bounds)]
    if hint is str:
        return Annotated[str, StringConstraints(max_length=64, **bounds)]
    if hint is int:
        return Annotated[int, Strict(), Field(**bounds)]
    if hint is float:
        return Annotated[float, Field(allow_inf_nan=False, **bounds)]
    raise TypeError(f"EvalConfig field of type {hint!r} has no API type")


def config_model(limits: ServiceConfig) -> type[BaseModel]:
    """The request's ``config`` model, derived field by field from `EvalConfig` (its defaults and
    docstrings stay the gym's) with the server's bounds."""
    hints = get_type_hints(EvalConfig)
    table = _config_bounds(limits)
    missing = [f.name for f in dataclasses.fields(EvalConfig) if f.name not in table]
    if missing:
        raise TypeError(f"EvalConfig fields without API bounds: {missing}")
    spec = {}
    for f in dataclasses.fields(EvalConfig):
        default = list(f.default) if isinstance(f.default, tuple) else f.default
        spec[f.name] = (_api_type(hints[f.name], dict(table[f.name])), Field(default))
    return create_model("EvalConfigIn", __base__=_Strict, **spec)


@dataclass(frozen=True)
class RequestModels:
    """The request bodies of one server (their bounds depend on its configuration)."""

    config: type[BaseModel]
    problem: type[BaseModel]
    request: type[BaseModel]
    batch: type[BaseModel]


def request_models(limits: ServiceConfig) -> RequestModels:
    """Build the bounded request models for a server with these limits."""
    config_in = config_model(limits)

    class ProblemIn(_Strict):
        """A reference problem in KernelBench format (accepted only with ``allow_custom_problems``)."""

        name: str = Field(min_length=1, max_length=128, pattern=rf"^{KEY_PART}$")
        level: int = Field(ge=1, le=4)
        code: str = Field(min_length=1, max_length=limits.max_problem_bytes)
        problem_id: Annotated[int, Field(ge=0, le=2**31)] | Annotated[str, Field(max_length=128)] = ""
        source: str = Field("file", max_length=128, pattern=rf"^{KEY_PART}$")
        dtype: Literal[tuple(DTYPE_BYTES)] = "float32"
        cpu_overrides: Annotated[dict[
            Annotated[str, Field(max_length=64, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")],
            Annotated[int, Field(ge=1, le=1 << 24)],
        ], at_most(MAX_OVERRIDES)] = Field(default_factory=dict)
        metadata: Annotated[dict[Annotated[str, Field(max_length=128)], Any],
                            BeforeValidator(shallow_json)] = Field(default_factory=dict)

    class EvalRequestIn(_Strict):
        """One solution to evaluate against one problem, named by key (``source/L{level}/name``)."""

        problem_key: str | None = Field(
            None, max_length=300, pattern=PROBLEM_KEY, description="A problem the server loaded."
        )
        problem: ProblemIn | None = Field(
            None, description="Reference code: only for a key the server did not load, and only "
            "when it allows custom problems; for a loaded key it must match the server's."
        )
        solution: str = Field(
            max_length=limits.max_solution_bytes,
            description="Source defining `class ModelNew` with Triton kernels (or, for language cuda, "
            "CUDA kernels built by `load_inline` from sources in the file).",
        )
        language: Literal[LANGUAGES] = Field(  # type: ignore[valid-type]
            "triton", description="What the solution is written in: triton or cuda."
        )
        config: config_in = Field(default_factory=config_in)  # type: ignore[valid-type]
        request_id: str = Field("", max_length=256, description="Echoed in the result.")
        idempotency_key: str | None = Field(
            None, min_length=1, max_length=256,
            description="Submitting the same key again returns the same job (per client).",
        )
        priority: int = Field(0, ge=-100, le=100, description="Higher runs first.")

    class BatchIn(_Strict):
        requests: list[EvalRequestIn] = Field(min_length=1, max_length=MAX_LIST, fail_fast=True)

    return RequestModels(config_in, ProblemIn, EvalRequestIn, BatchIn)


MAX_LIST = 1 << 16
"""The longest list a body may hold (each route's own limit, e.g. ``max_batch``, is checked after):
a longer one is refused before its items are validated, and the first bad item ends validation, so
a body of a million wrong items costs one error, not a million."""
MAX_OVERRIDES = 64
"""Most entries of a problem's ``cpu_overrides``."""
MAX_DEPTH = 8
MAX_NODES = 4096


def shallow_json(value: Any) -> Any:
    """Metadata at most `MAX_DEPTH` deep and `MAX_NODES` values in all (walked without recursion, before
    its keys are validated, a container's length counted before its items are): a deeply nested value
    would crash the store's JSON encoder and fill the log with its traceback."""
    stack, nodes = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        children = len(item) if isinstance(item, (dict, list)) else 0
        if depth > MAX_DEPTH or nodes + len(stack) + children > MAX_NODES:  # values seen or pending
            raise ValueError(f"metadata nested deeper than {MAX_DEPTH} or larger than {MAX_NODES} values")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return value


def eval_config(body: BaseModel) -> EvalConfig:
    """The gym's config from a validated ``config`` model; `ConfigError` for cross-field rules."""
    return EvalConfig.from_dict(body.model_dump())


class WaitIn(_Strict):
    ids: list[Annotated[str, Field(max_length=64)]] = Field(min_length=1, max_length=MAX_LIST, fail_fast=True)
    timeout: float = Field(
        30.0, ge=0.0, allow_inf_nan=False, description="Seconds to wait for every job to be terminal."
    )


class JobRef(BaseModel):
    id: str
    status: str
    cached: bool
    created: bool = Field(description="False when an idempotency key matched an existing job.")


class SubmitOut(BaseModel):
    jobs: list[JobRef]


class JobOut(BaseModel):
    id: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    attempts: int
    cached: bool
    worker: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None = Field(
        description="Cause of an infrastructure failure (only ours; a bad solution is a result)."
    )
    error_class: str | None
    request_id: str
    result: dict[str, Any] | None = Field(description="EvalResult (schema v1) once done.")

    @classmethod
    def from_job(cls, job: Job) -> "JobOut":
        return cls(
            id=job.id,
            status=job.status.value,
            attempts=job.attempts,
            cached=job.cached,
            worker=job.worker,
            created_at=job.created,
            started_at=job.started,
            finished_at=job.finished,
            error=public_text(job.error),
            error_class=job.error_class,
            request_id=job.request_id,
            result=own_result(job),
        )


_PATH = re.compile(r"(?:/[\w.+-]+){2,}/?")


def public_text(text: str | None) -> str | None:
    """An error as a client may read it: first line, server paths replaced, bounded."""
    if text is None:
        return None
    first = text.strip().splitlines()[0] if text.strip() else ""
    return _PATH.sub("<path>", first)[:500]


def own_result(job: Job) -> dict[str, Any] | None:
    """The job's result carrying the job's own metadata: a result served from the cache or a
    coalesced duplicate was computed for another client's job, whose ``request_id`` and problem
    name are not this client's to see."""
    if not job.result_json:
        return None
    result = json.loads(job.result_json)
    result["request_id"] = job.request_id
    result["problem_key"] = job.problem_key
    return result


class JobsOut(BaseModel):
    jobs: list[JobOut]
    missing: list[str] = Field(default_factory=list, description="Ids the store does not know.")


class HealthOut(BaseModel):
    status: Literal["ok", "degraded", "down"]
    version: str
    workers_ready: int
    workers_total: int
    queue_depth: int
    max_batch: int = Field(description="Most requests per batch submission and ids per wait.")
    custom_problems: bool = Field(description="Whether requests may carry reference code.")


class QueueOut(BaseModel):
    counts: dict[str, int]
    depth: int
