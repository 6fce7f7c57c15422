"""Pydantic models of the HTTP API (the edge: the gym's own types are plain dataclasses)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.problems.problem import Problem
from drkernel.service.store import Job


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProblemIn(_Strict):
    """A reference problem in KernelBench format (see `drkernel.problems.Problem`)."""

    name: str = Field(min_length=1, max_length=256)
    level: int = Field(ge=1, le=4)
    code: str = Field(min_length=1, description="Reference source defining Model, get_inputs, get_init_inputs.")
    problem_id: int | str = ""
    source: str = "file"
    dtype: str = "float32"
    cpu_overrides: dict[str, int] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class EvalRequestIn(_Strict):
    """One solution to evaluate against one problem."""

    problem: ProblemIn
    solution: str = Field(description="Source defining `class ModelNew` with Triton kernels.")
    config: dict[str, Any] = Field(default_factory=dict, description="EvalConfig fields; unknown keys are rejected.")
    request_id: str = Field("", max_length=256, description="Echoed in the result.")
    idempotency_key: str | None = Field(None, min_length=1, max_length=256,
                                        description="Submitting the same key again returns the same job.")
    priority: int = Field(0, ge=-100, le=100, description="Higher runs first.")

    def to_request(self) -> EvalRequest:
        """The gym's request; raises `ConfigError` for an invalid config."""
        return EvalRequest(problem=Problem.from_dict(self.problem.model_dump()), solution=self.solution,
                           config=EvalConfig.from_dict(self.config), request_id=self.request_id)


class BatchIn(_Strict):
    requests: list[EvalRequestIn] = Field(min_length=1)


class WaitIn(_Strict):
    ids: list[str] = Field(min_length=1)
    timeout: float = Field(30.0, ge=0.0, description="Seconds to wait for every job to be terminal.")


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
    error: str | None = Field(description="Cause of an infrastructure failure (only ours; a bad solution is a result).")
    error_class: str | None
    request_id: str
    result: dict[str, Any] | None = Field(description="EvalResult (schema v1) once done.")

    @classmethod
    def from_job(cls, job: Job) -> "JobOut":
        return cls(id=job.id, status=job.status.value, attempts=job.attempts, cached=job.cached, worker=job.worker,
                   created_at=job.created, started_at=job.started, finished_at=job.finished, error=job.error,
                   error_class=job.error_class, request_id=job.request_id,
                   result=json.loads(job.result_json) if job.result_json else None)


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


class QueueOut(BaseModel):
    counts: dict[str, int]
    depth: int
