"""The FastAPI app: KernelGym as a service, versioned under /v1 (OpenAPI docs at /docs)."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from typing import Sequence

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from drkernel import __version__
from drkernel.errors import ConfigError
from drkernel.service.auth import bearer_guard
from drkernel.service.config import ServiceConfig
from drkernel.service.metrics import Gauge, ServiceMetrics
from drkernel.service.scheduler import Scheduler, Submission
from drkernel.service.schemas import (BatchIn, EvalRequestIn, HealthOut, JobOut, JobRef, JobsOut, QueueOut,
                                      SubmitOut, WaitIn)
from drkernel.service.store import IdempotencyConflict, JobStore, StoreError
from drkernel.service.workers import WorkerHandle, local_workers


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes is answered 413 (declared or streamed)."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await _too_large(self.limit, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _BodyTooLarge:
            await _too_large(self.limit, send)


class _BodyTooLarge(Exception):
    pass


async def _too_large(limit: int, send) -> None:
    response = JSONResponse({"error": "request_too_large", "detail": f"request body exceeds {limit} bytes"},
                            status_code=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    await response({"type": "http"}, None, send)


def _make_handles(config: ServiceConfig) -> list[WorkerHandle]:
    if config.ray_address:
        from drkernel.service.ray_backend import ray_workers

        return ray_workers(config)
    return local_workers(config.devices, config.evaluator, config.evaluator_kwargs, config.slots_per_worker)


def _error(code: int, error: str, detail) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=code)


def create_app(config: ServiceConfig, handles: Sequence[WorkerHandle] | None = None) -> FastAPI:
    """The service app. ``handles``: device workers to use (default: local processes per
    ``config.devices``, or Ray actors with ``config.ray_address``)."""
    metrics = ServiceMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        store = JobStore(config.db_path, synchronous=config.sqlite_synchronous, max_attempts=config.max_attempts)
        scheduler = Scheduler(store, list(handles) if handles is not None else _make_handles(config), config, metrics)
        app.state.scheduler = scheduler
        _attach_gauges(metrics, scheduler)
        await scheduler.start()
        try:
            yield
        finally:
            await scheduler.stop()
            store.close()

    app = FastAPI(title="KernelGym", version=__version__, lifespan=lifespan,
                  description="Evaluate Triton solutions against PyTorch references: a durable job queue in "
                              "front of per-device gym workers.")
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)

    @app.middleware("http")
    async def timed(request: Request, call_next):
        t0 = time.perf_counter()
        response = await call_next(request)
        metrics.http_seconds.observe(time.perf_counter() - t0)
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError):
        detail = [{"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
                  for e in exc.errors()]
        return _error(422, "invalid_request", detail)

    @app.exception_handler(ConfigError)
    async def bad_config(_: Request, exc: ConfigError):
        return _error(422, "invalid_config", str(exc))

    @app.exception_handler(IdempotencyConflict)
    async def conflict(_: Request, exc: IdempotencyConflict):
        return _error(409, "idempotency_conflict", str(exc))

    @app.exception_handler(StoreError)
    async def store_down(_: Request, exc: StoreError):
        return _error(503, "store_unavailable", str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException):
        return JSONResponse({"error": _ERROR_NAMES.get(exc.status_code, "http_error"), "detail": exc.detail},
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    app.include_router(_router(config, metrics))
    return app


_ERROR_NAMES = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed", 413: "request_too_large"}


def _attach_gauges(metrics: ServiceMetrics, scheduler: Scheduler) -> None:
    def queue():
        return {(k,): float(v) for k, v in scheduler.store.counts().items() if k in ("queued", "running")}

    def workers():
        out: dict[tuple[str, ...], float] = {}
        for w in scheduler.workers_view():
            out[(w["state"],)] = out.get((w["state"],), 0.0) + 1
        return out

    def in_flight():
        return {(w["name"], w["device_name"]): float(w["in_flight"]) for w in scheduler.workers_view()}

    metrics.gauges = [Gauge("kernelgym_jobs", "Jobs waiting or running.", ("status",), queue),
                      Gauge("kernelgym_workers", "Device workers by state.", ("state",), workers),
                      Gauge("kernelgym_worker_in_flight", "Jobs in flight per worker.", ("worker", "device_name"),
                            in_flight)]


def _router(config: ServiceConfig, metrics: ServiceMetrics) -> APIRouter:
    guard = [Depends(bearer_guard(config.token))]
    r = APIRouter(prefix="/v1")

    def sched(request: Request) -> Scheduler:
        return request.app.state.scheduler

    def submit(request: Request, items: list[EvalRequestIn]) -> SubmitOut:
        subs = [Submission(i.to_request(), i.idempotency_key, i.priority) for i in items]
        out = sched(request).submit(subs)
        return SubmitOut(jobs=[JobRef(id=j.id, status=j.status.value, cached=j.cached, created=c) for j, c in out])

    @r.post("/jobs", status_code=202, response_model=JobRef, dependencies=guard, summary="Submit one evaluation")
    async def submit_one(body: EvalRequestIn, request: Request) -> JobRef:
        return submit(request, [body]).jobs[0]

    @r.post("/jobs/batch", status_code=202, response_model=SubmitOut, dependencies=guard,
            summary="Submit a batch of evaluations (ids in request order)")
    async def submit_batch(body: BatchIn, request: Request) -> SubmitOut:
        if len(body.requests) > config.max_batch:
            raise HTTPException(413, f"batch of {len(body.requests)} exceeds max_batch={config.max_batch}")
        return submit(request, body.requests)

    @r.get("/jobs/{job_id}", response_model=JobOut, dependencies=guard, summary="Status and result of a job")
    async def get_job(job_id: str, request: Request) -> JobOut:
        job = sched(request).store.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return JobOut.from_job(job)

    @r.get("/jobs/{job_id}/wait", response_model=JobOut, dependencies=guard,
           summary="Long poll: the job once terminal, or as it is after `timeout` seconds")
    async def wait_one(job_id: str, request: Request,
                       timeout: float = Query(30.0, ge=0.0, description="seconds")) -> JobOut:
        jobs = await sched(request).wait([job_id], min(timeout, config.max_wait_s))
        if job_id not in jobs:
            raise HTTPException(404, f"no job {job_id}")
        return JobOut.from_job(jobs[job_id])

    @r.post("/jobs/wait", response_model=JobsOut, dependencies=guard,
            summary="Long poll on many jobs: returns when all are terminal or after `timeout` seconds")
    async def wait_many(body: WaitIn, request: Request) -> JobsOut:
        if len(body.ids) > config.max_batch:
            raise HTTPException(413, f"{len(body.ids)} ids exceed max_batch={config.max_batch}")
        jobs = await sched(request).wait(body.ids, min(body.timeout, config.max_wait_s))
        return JobsOut(jobs=[JobOut.from_job(jobs[i]) for i in body.ids if i in jobs],
                       missing=[i for i in body.ids if i not in jobs])

    @r.delete("/jobs/{job_id}", response_model=JobOut, dependencies=guard,
              summary="Cancel a job that is not terminal yet")
    async def cancel(job_id: str, request: Request) -> JobOut:
        job = sched(request).cancel(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id}")
        return JobOut.from_job(job)

    @r.get("/health", response_model=HealthOut, summary="Liveness and readiness (no auth)")
    async def health(request: Request) -> HealthOut:
        s = sched(request)
        ready, total = s.ready_workers(), len(s.workers)
        counts = s.store.counts()
        state = "ok" if ready == total else ("degraded" if ready else "down")
        return HealthOut(status=state, version=__version__, workers_ready=ready, workers_total=total,
                         queue_depth=counts["queued"], max_batch=config.max_batch)

    @r.get("/workers", dependencies=guard, summary="Device workers with their state and load")
    async def workers(request: Request) -> list[dict]:
        return sched(request).workers_view()

    @r.get("/queue", response_model=QueueOut, dependencies=guard, summary="Jobs per status")
    async def queue(request: Request) -> QueueOut:
        counts = sched(request).store.counts()
        return QueueOut(counts=counts, depth=counts["queued"])

    @r.get("/metrics", response_class=PlainTextResponse, dependencies=guard, summary="Prometheus metrics")
    async def prometheus() -> str:
        return metrics.render()

    return r
