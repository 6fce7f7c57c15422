"""The FastAPI app: KernelGym as a service, versioned under /v1 (the OpenAPI schema at
/openapi.json, a page of the routes at /docs that loads nothing from elsewhere, Prometheus metrics
at /metrics).

Every path but the open ones (health, metrics, docs) belongs to an authenticated client (`gate.Gate`,
decided from the request head, before any body is read); a client sees and cancels only its own jobs (another's id is a 404). Request bodies are the
bounded models of `schemas.request_models`, so no body reaches a worker with a value it cannot run.
What costs CPU per request (building, hashing and storing a batch; reading many jobs) runs in a
thread, not on the event loop every client shares; a client holds at most ``max_waits_per_client``
long polls at once, and what its reads return is charged to it (`AnswerBudget`), as its bodies are.
"""

import asyncio
import html
import json
import logging
import math
import os
import secrets
import time
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Sequence

import pydantic_core
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from drkernel import __version__
from drkernel.errors import ConfigError
from drkernel.service.admission import BodyTooComplex, ReadersBusy, read_body_tokens
from drkernel.service.body_reader import MAX_BODY_TOKENS, upper_bound
from drkernel.service.config import ServiceConfig
from drkernel.service.gate import Gate, RateLimiter, client_of
from drkernel.service.intake import ProblemCatalog, Rejected, admitted, to_request
from drkernel.service.metrics import Gauge, ServiceMetrics
from drkernel.service.scheduler import Scheduler, Submission
from drkernel.service.schemas import (
    HealthOut,
    JobOut,
    JobRef,
    JobsOut,
    QueueOut,
    SubmitOut,
    WaitIn,
    request_models,
)
from drkernel.service.store import (
    ClientRemoved,
    IdempotencyConflict,
    Job,
    JobStore,
    Quota,
    QuotaExceeded,
    ServerLock,
    StoreError,
)
from drkernel.service.workers import WorkerHandle, local_workers

log = logging.getLogger(__name__)
LONG_POLL_ROUTES = frozenset({"/v1/jobs/{job_id}/wait", "/v1/jobs/wait"})
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""HTTP methods with a label of their own; any other token a client sends counts as ``other``."""


def _make_handles(config: ServiceConfig) -> list[WorkerHandle]:
    if config.ray_address:
        from drkernel.service.ray_backend import ray_workers

        return ray_workers(config)
    return local_workers(config.devices, config.evaluator, config.evaluator_kwargs, config.slots_per_worker,
                         config.host_memory_bytes, config.device_memory_bytes)


MAX_ERRORS_SHOWN = 50
"""Validation errors listed in a 422 reply (the rest counted)."""
MAX_LOC_CHARS = 128
"""Characters of each part of an error's location (an unknown key a client sent) in a 422 reply."""


def _error(code: int, error: str, detail) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=code)


def ensure_clients(store: JobStore, config: ServiceConfig) -> Path | None:
    """Register ``config.token`` as client ``default``; with no token and no client yet (single-user
    mode), generate one for client ``local`` and write it to the token file (0600), which is
    returned. Raises `ConfigError` when the token cannot be registered."""
    try:
        if config.token is not None:
            store.add_client_token("default", config.token, replace=True)  # a new --token wins
            if os.environ.get("KERNELGYM_TOKEN") != config.token:
                log.warning("the token of client 'default' was given on the command line, which every "
                            "local user can read (ps, /proc/<pid>/cmdline): pass it in KERNELGYM_TOKEN, "
                            "or register clients with `drkernel gym token add`")
            return None
        if store.clients():
            return None
        path = Path(config.token_file or f"{config.db_path}.token")
        token = secrets.token_urlsafe(32)
        store.add_client_token("local", token)
    except ValueError as e:
        raise ConfigError(f"cannot register the server's token: {e}") from e
    write_secret(path, token + "\n")
    return path


def write_secret(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by its owner only: a fresh file (O_EXCL, mode 0600) renamed
    over ``path``, so a symbolic link planted at ``path`` is replaced, never followed."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_app(config: ServiceConfig, handles: Sequence[WorkerHandle] | None = None) -> FastAPI:
    """The service app. ``handles``: device workers to use (default: local processes per
    ``config.devices``, or Ray actors with ``config.ray_address``). Starting it takes the store's
    server lock (`StoreLocked` when another server holds it)."""
    metrics = ServiceMetrics()
    catalog = ProblemCatalog.load(config.problems)
    waits = WaitSlots(config.max_waits_per_client)
    store_box: list[JobStore] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        lock = ServerLock(config.db_path).acquire()
        store = JobStore(config.db_path, synchronous=config.sqlite_synchronous, max_attempts=config.max_attempts)
        store_box.append(store)
        token_file = ensure_clients(store, config)
        if token_file is not None:
            log.warning("single-user mode: the token of client 'local' is in %s", token_file)
        scheduler = Scheduler(store, list(handles) if handles is not None else _make_handles(config), config, metrics)
        app.state.scheduler = scheduler
        _attach_gauges(metrics, scheduler, waits)
        await scheduler.start()
        try:
            yield
        finally:
            await scheduler.stop()
            store.close()
            lock.release()

    def lookup(token: str) -> str | None:
        return store_box[0].client_for(token) if store_box else None

    app = FastAPI(
        title="KernelGym",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,  # Swagger UI loads from a CDN: /docs is served here instead
        redoc_url=None,
        description="Evaluate Triton solutions against PyTorch references: a durable job queue in "
        "front of per-device gym workers.",
    )
    _install_handlers(app)
    app.state.parse_budget = RateLimiter(config.parse_rate_per_client, 2 * MAX_BODY_TOKENS)
    api = _router(config, catalog, waits)
    app.include_router(api)
    app.add_api_route("/metrics", lambda: PlainTextResponse(metrics.render()), methods=["GET"],
                      summary="Prometheus metrics (no auth)", include_in_schema=True)
    app.add_api_route("/docs", lambda: HTMLResponse(_docs_page(app.openapi())), methods=["GET"],
                      include_in_schema=False)
    routes = [r for r in (*api.routes, *app.router.routes) if isinstance(getattr(r, "path", None), str)]
    app.add_middleware(Gate, lookup=lookup, limiter=RateLimiter(config.rate_per_client, config.rate_burst),
                       max_body=config.max_body_bytes, body_timeout_s=config.body_timeout_s,
                       peers=RateLimiter(config.rate_per_peer, config.peer_burst),
                       anonymous=RateLimiter(config.rate_unverified, config.unverified_burst),
                       token_ttl_s=config.token_ttl_s, bodies_in_flight=config.max_body_bytes_in_flight,
                       body_routes=[r for r in routes if getattr(r, "body_field", None) is not None])
    app.add_middleware(_Timed, metrics=metrics, routes=routes)
    return app


def _docs_page(schema: dict) -> str:
    """The routes, their summaries and the bearer header, as plain HTML with no external asset
    (an offline cluster sees it whole); the full schema is /openapi.json."""
    rows = "".join(
        f"<tr><td><code>{html.escape(method.upper())}</code></td><td><code>{html.escape(path)}</code></td>"
        f"<td>{html.escape(op.get('summary', ''))}</td></tr>"
        for path, ops in schema.get("paths", {}).items() for method, op in ops.items()
    )
    title = html.escape(f"{schema['info']['title']} {schema['info']['version']}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        f"<h1>{title}</h1><p>{html.escape(schema['info'].get('description', ''))}</p>"
        "<p>Every <code>/v1</code> route but health needs <code>Authorization: Bearer &lt;token&gt;</code>:"
        "</p><pre>curl -H \"Authorization: Bearer $KERNELGYM_TOKEN\" http://HOST:PORT/v1/queue</pre>"
        "<p>The OpenAPI schema (for any OpenAPI viewer or client generator): "
        "<a href='/openapi.json'>/openapi.json</a></p>"
        f"<table border='1' cellpadding='4'><tr><th>method</th><th>path</th><th>summary</th></tr>{rows}"
        "</table></body></html>"
    )


class _Timed:
    """ASGI middleware (outermost): latency and count per route template, method and status;
    long polls in a histogram of their own; an unhandled exception is counted as a 500, answered as
    one, and logged as one line (a client that can cause it many times cannot fill the disk with
    tracebacks)."""

    def __init__(self, app, metrics: ServiceMetrics, routes):
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, code, started = time.perf_counter(), [500], [False]

        async def sending(message):
            if message["type"] == "http.response.start":
                code[0], started[0] = message["status"], True
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as e:  # noqa: BLE001 - the request fails, the server goes on
            log.error("internal error on %s %s: %s: %s", scope.get("method", ""), scope.get("path", "")[:200],
                      type(e).__name__, str(e)[:200])
            code[0] = 500
            if not started[0]:
                await _error(500, "internal_error", "the server failed on this request")(scope, receive, send)
        finally:
            route = self._route(scope)
            method = scope.get("method", "")
            labels = dict(route=route, method=method if method in METHODS else "other",
                          status=str(code[0]) if 100 <= code[0] <= 599 else "other")
            hist = self.metrics.long_poll_seconds if route in LONG_POLL_ROUTES else self.metrics.http_seconds
            hist.observe(time.perf_counter() - t0, **labels)
            self.metrics.http_responses.inc(**labels)

    def _route(self, scope) -> str:
        for r in self.routes:
            match, _ = r.matches(scope)
            if match is Match.FULL:
                return getattr(r, "path", "other")
        return "unmatched"  # one label for every unknown path: no cardinality from scanners


def _message(error: dict) -> str:
    """A validation error's message; a body that is not JSON also says where the parser stopped."""
    reason = (error.get("ctx") or {}).get("error") if error.get("type") == "json_invalid" else None
    return f"{error.get('msg', '')}: {reason}" if reason else str(error.get("msg", ""))


def _install_handlers(app: FastAPI) -> None:
    """Errors as ``{"error", "detail"}``: a 422 names the field; nothing carries a traceback."""

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError):
        errors = exc.errors()  # few: every container is refused by its length before its items
        detail = [
            {"loc": [p if isinstance(p, int) else str(p)[:MAX_LOC_CHARS] for p in e.get("loc", ())],
             "msg": _message(e)[:500], "type": e.get("type", "")}
            for e in errors[:MAX_ERRORS_SHOWN]
        ]
        if len(errors) > MAX_ERRORS_SHOWN:
            detail.append({"loc": [], "msg": f"{len(errors) - MAX_ERRORS_SHOWN} more errors", "type": "truncated"})
        return _error(422, "invalid_request", detail)


    @app.exception_handler(Rejected)
    async def rejected(_: Request, exc: Rejected):
        out = _error(exc.code, exc.error, [{"loc": list(exc.loc), "msg": exc.message, "type": exc.error}])
        if exc.code == 429:  # busy (admission's reading children): a retry soon may pass
            out.headers["Retry-After"] = "1"
        return out

    @app.exception_handler(ConfigError)
    async def bad_config(_: Request, exc: ConfigError):
        return _error(422, "invalid_config", str(exc))

    @app.exception_handler(QuotaExceeded)
    async def over_quota(_: Request, exc: QuotaExceeded):
        return JSONResponse({"error": "quota_exceeded", "detail": str(exc)}, status_code=429,
                            headers={"Retry-After": "5"})

    @app.exception_handler(ClientRemoved)
    async def removed(_: Request, exc: ClientRemoved):
        return JSONResponse({"error": "unauthorized", "detail": str(exc)}, status_code=401,
                            headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(IdempotencyConflict)
    async def conflict(_: Request, exc: IdempotencyConflict):
        return _error(409, "idempotency_conflict", str(exc))

    @app.exception_handler(StoreError)
    async def store_down(_: Request, exc: StoreError):
        log.error("store error: %s", exc)
        return _error(503, "store_unavailable", "the job store is unavailable; retry later")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException):
        return JSONResponse(
            {"error": _ERROR_NAMES.get(exc.status_code, "http_error"), "detail": exc.detail},
            status_code=exc.status_code,
            headers=getattr(exc, "headers", None),
        )

    @app.exception_handler(Exception)
    async def internal(_: Request, exc: Exception):
        log.exception("unhandled error")
        return _error(500, "internal_error", "internal error (logged on the server)")


_ERROR_NAMES = {
    400: "invalid_body",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    429: "quota_exceeded",
}


class WaitSlots:
    """Long polls held open per client: `hold` raises a 429 past ``limit`` (event loop only)."""

    def __init__(self, limit: int):
        self.limit = limit
        self._held: dict[str, int] = {}

    @property
    def total(self) -> int:
        return sum(self._held.values())

    @contextmanager
    def hold(self, client: str):
        if self._held.get(client, 0) >= self.limit:
            raise HTTPException(429, f"client {client!r} holds max_waits_per_client={self.limit} long polls",
                                headers={"Retry-After": "1"})
        self._held[client] = self._held.get(client, 0) + 1
        try:
            yield
        finally:
            self._held[client] -= 1
            if not self._held[client]:
                del self._held[client]


ANSWER_OVERHEAD_BYTES = 512
"""What one job costs an answer besides its result and error (its id, times, keys): `answer_bytes`."""


def answer_bytes(jobs: Sequence[Job]) -> int:
    """About the bytes of ``jobs``' answer (a result's JSON is sent at about its stored length), known
    once they are read: what they cost their client's `AnswerBudget`."""
    return sum(len(j.result_json or "") + len(j.error or "") + ANSWER_OVERHEAD_BYTES for j in jobs)


class AnswerBudget:
    """Bytes of jobs a client's reads return, per client (event loop only): a balance of at most
    ``burst`` bytes that fills at ``rate`` a second. The request bodies a client sends are bounded and
    charged (`_counted`), but a 150-KB long poll on 4,096 finished jobs asks for a 15-MB answer, read
    under the store's one read lock and encoded in the threads every client shares (hostile round 12:
    one client's 8 polls in a loop made another's reads 280x slower). So a read is charged what it
    returned, once made (its size is known only then; the balance may go below zero), a client's
    reads are made one at a time, and one that finds its client owing is a 429 before it reads: a
    client gets at most one answer beyond its balance, however many connections and polls it holds."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self._balance = RateLimiter(rate, burst)  # a client's bytes left; below zero while it owes
        self._turns: dict[str, tuple[asyncio.Lock, int]] = {}  # client -> (its reads' lock, reads using it)

    def refuse_if_owed(self, client: str) -> None:
        """429 (with the seconds until it owes nothing) when ``client``'s answers took more than its
        balance."""
        wait = self._balance.take(client, 0)
        if wait > 0:
            raise HTTPException(429, f"client {client!r} was answered more than answer_bytes_per_client="
                                f"{self.rate:g} bytes per second; retry in {wait:.1f} s",
                                headers={"Retry-After": str(max(1, math.ceil(wait)))})

    def _charged(self, client: str, read: asyncio.Future) -> None:
        """Charge a read's answer to ``client`` once it is done (a read that failed returned nothing)."""
        if not read.cancelled() and read.exception() is None:
            self._balance.charge(client, answer_bytes(read.result()))

    async def read(self, client: str, fn: Callable[[], list[Job]]) -> list[Job]:
        """``fn()``, a read of ``client``'s jobs, in a thread, after the client's earlier reads, charged
        to its balance when it is done (a caller gone meanwhile pays too); 429 without reading while
        the client owes."""
        lock, users = self._turns.get(client, (asyncio.Lock(), 0))
        self._turns[client] = (lock, users + 1)
        try:
            async with lock:
                self.refuse_if_owed(client)
                done = asyncio.ensure_future(run_in_threadpool(fn))
                done.add_done_callback(lambda f: self._charged(client, f))
                return await asyncio.shield(done)
        finally:
            lock, users = self._turns[client]
            if users > 1:
                self._turns[client] = (lock, users - 1)
            else:
                del self._turns[client]


def _attach_gauges(metrics: ServiceMetrics, scheduler: Scheduler, waits: WaitSlots) -> None:
    def queue():
        return {(k,): float(v) for k, v in scheduler.store.counts().items() if k in ("queued", "running")}

    def workers():
        out: dict[tuple[str, ...], float] = {}
        for w in scheduler.workers_view():
            out[(w["state"],)] = out.get((w["state"],), 0.0) + 1
        return out

    def in_flight():
        return {(w["name"], w["device_name"]): float(w["in_flight"]) for w in scheduler.workers_view()}

    metrics.gauges = [
        Gauge("kernelgym_jobs", "Jobs waiting or running.", ("status",), queue),
        Gauge("kernelgym_workers", "Device workers by state.", ("state",), workers),
        Gauge(
            "kernelgym_worker_in_flight", "Jobs in flight per worker.", ("worker", "device_name"), in_flight
        ),
        Gauge("kernelgym_long_polls", "Long polls held open (all clients).", (), lambda: {(): float(waits.total)}),
    ]


def _router(config: ServiceConfig, catalog: ProblemCatalog, waits: "WaitSlots") -> APIRouter:
    r = APIRouter(prefix="/v1", route_class=_OffLoopRoute)
    _submit_routes(r, config, catalog)
    _job_routes(r, config, waits)
    _status_routes(r, config)
    return r


def sched(request: Request) -> Scheduler:
    return request.app.state.scheduler


def _submit_routes(r: APIRouter, config: ServiceConfig, catalog: ProblemCatalog) -> None:
    """``POST /jobs`` and ``/jobs/batch``: validated, hashed and stored off the event loop."""
    models = request_models(config)
    RequestIn, BatchIn = models.request, models.batch  # noqa: N806 - classes built per server
    quota = Quota(config.max_queued_per_client, config.max_stored_bytes_per_client)
    jobs_rate = RateLimiter(config.submit_rate_per_client, config.submit_burst)

    async def submit(request: Request, items: list, where) -> SubmitOut:
        s, client = sched(request), client_of(request.scope)
        wait = jobs_rate.take(client, len(items))  # every job, cached ones too
        if wait > 0:
            raise HTTPException(429, f"client {client!r} submits more than submit_rate_per_client="
                                f"{config.submit_rate_per_client:g} jobs per second (cached ones count)",
                                headers={"Retry-After": str(max(1, math.ceil(wait)))})
        served = s.devices()

        def store():  # in a thread: parsing, hashing and the SQLite transaction
            reqs = [to_request(b, catalog, config.allow_custom_problems, served, where(i))
                    for i, b in enumerate(items)]
            subs = [Submission(q, b.idempotency_key, b.priority, client) for q, b in zip(reqs, items)]
            jobs = s.new_jobs(subs)
            s.store.precheck(jobs, quota)  # quota and idempotency before any problem code is read
            return s.store.submit([admitted(j, q, where(i), served)
                                   for i, (j, q) in enumerate(zip(jobs, reqs))],
                                  quota)

        out = await run_in_threadpool(store)
        s.accepted(out)
        return SubmitOut(jobs=[JobRef(id=j.id, status=j.status.value, cached=j.cached, created=c) for j, c in out])

    @r.post("/jobs", status_code=202, response_model=JobRef, summary="Submit one evaluation")
    async def submit_one(body: RequestIn, request: Request) -> JobRef:  # type: ignore[valid-type]
        return (await submit(request, [body], lambda i: ("body",))).jobs[0]

    @r.post("/jobs/batch", status_code=202, response_model=SubmitOut,
            summary="Submit a batch of evaluations (ids in request order)")
    async def submit_batch(body: BatchIn, request: Request) -> SubmitOut:  # type: ignore[valid-type]
        if len(body.requests) > config.max_batch:
            raise HTTPException(413, f"batch of {len(body.requests)} exceeds max_batch={config.max_batch}")
        return await submit(request, body.requests, lambda i: ("body", "requests", i))


def _job_routes(r: APIRouter, config: ServiceConfig, waits: "WaitSlots") -> None:
    """A client's own jobs: read, long-poll (ownership first, waiters capped per client), cancel; what
    a read returns is charged to its client (`AnswerBudget`)."""
    answers = AnswerBudget(config.answer_bytes_per_client, config.answer_burst_bytes)

    async def read(request: Request, client: str, ids: list[str]) -> dict[str, Job]:
        """``client``'s jobs among ``ids`` (those `Scheduler.wait_ids` returned), charged to it."""
        store = sched(request).store
        jobs = await answers.read(client, lambda: list(store.get_many(ids, client).values()))
        return {j.id: j for j in jobs}

    @r.get("/jobs/{job_id}", response_model=JobOut, summary="Status and result of a job")
    async def get_job(job_id: str, request: Request) -> JobOut:
        store, client = sched(request).store, client_of(request.scope)
        jobs = await answers.read(client, lambda: [j for j in (store.get(job_id, client),) if j is not None])
        if not jobs:
            raise HTTPException(404, "no such job")
        return JobOut.from_job(jobs[0])

    @r.get("/jobs/{job_id}/wait", response_model=JobOut,
           summary="Long poll: the job once terminal, or as it is after `timeout` seconds")
    async def wait_one(
        job_id: str, request: Request,
        timeout: float = Query(30.0, ge=0.0, allow_inf_nan=False, description="seconds"),
    ) -> JobOut:
        client = client_of(request.scope)
        answers.refuse_if_owed(client)  # before a poll is held for an answer that would be refused
        with waits.hold(client):
            ids = await sched(request).wait_ids([job_id], min(timeout, config.max_wait_s), client)
            jobs = await read(request, client, ids)
        if job_id not in jobs:
            raise HTTPException(404, "no such job")
        return JobOut.from_job(jobs[job_id])

    @r.post("/jobs/wait", response_model=JobsOut,
            summary="Long poll on many jobs: returns when all are terminal or after `timeout` seconds")
    async def wait_many(body: WaitIn, request: Request):
        if len(body.ids) > config.max_batch:
            raise HTTPException(413, f"{len(body.ids)} ids exceed max_batch={config.max_batch}")
        client = client_of(request.scope)
        answers.refuse_if_owed(client)
        hold = waits.hold(client)
        hold.__enter__()  # held until the answer is sent: one slot per answer a reader has yet to take
        try:
            ids = await sched(request).wait_ids(body.ids, min(body.timeout, config.max_wait_s), client)
            jobs = await read(request, client, ids)
        except BaseException:
            hold.__exit__(None, None, None)
            raise
        found = [jobs[i] for i in body.ids if i in jobs]
        missing = [i for i in body.ids if i not in jobs]
        return StreamingResponse(_jobs_json(found, missing, hold), media_type="application/json")

    @r.delete("/jobs/{job_id}", response_model=JobOut,
              summary="Cancel a job that is not terminal yet (a running candidate is killed)")
    async def cancel(job_id: str, request: Request) -> JobOut:
        job = await sched(request).cancel(job_id, client_of(request.scope))  # the store's part in a thread
        if job is None:
            raise HTTPException(404, "no such job")
        return JobOut.from_job(job)


class _OffLoopJSON(Request):
    """A request whose JSON body is parsed in a worker thread by pydantic-core's parser, once `_counted`
    has bounded its tokens and charged them to its client: the parse holds the GIL throughout (about
    130 ns a token, 0.85 s for a 31-MiB body of numbers on a 2-core host), so the bound and the budget,
    not the thread, are what keep every other client's requests moving. A body that is not JSON, or
    nests past pydantic-core's 200 levels, is a 422 with the parser's message; it is never parsed again
    (a second parse on the event loop let one client's 1-MiB bodies stall every other client for
    seconds: hostile round 10)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            await _counted(body, client_of(self.scope), self.scope["app"].state.parse_budget)
            try:
                self._json = await run_in_threadpool(pydantic_core.from_json, body)
            except ValueError as e:
                raise json.JSONDecodeError(str(e)[:300], "", 0) from None
        return self._json


async def _counted(body: bytes, client: str, budget: RateLimiter) -> None:
    """Refuse a body of more JSON values and keys than the server parses (`admission.read_body_tokens`:
    its parse alone would hold the GIL every client shares): 413, or 429 while ``client``'s reading
    child is busy; then charge its tokens to ``client``'s parse budget: 429 past it. A refused body is
    charged too (what its child counted, else what its bytes bound), and a client that owes is 429 before
    a reading child counts its next body: refusals are not free to repeat (hostile round 15, A08: two
    identities looping 16-MiB bodies of numbers, each refused 413 and charged nothing, held both of
    the server's reading children and 7 of 8 of another client's custom problems were 429)."""
    owed = budget.take(client, 0)
    if owed:
        raise _parse_rate_exceeded(client, budget, owed)
    try:
        tokens = await run_in_threadpool(read_body_tokens, body, client)
    except BodyTooComplex as e:
        budget.charge(client, e.tokens or upper_bound(body))
        raise HTTPException(413, str(e)) from None
    except ReadersBusy as e:
        raise HTTPException(429, str(e), headers={"Retry-After": "1"}) from None
    wait = budget.take(client, tokens)
    if wait:
        raise _parse_rate_exceeded(client, budget, wait)


def _parse_rate_exceeded(client: str, budget: RateLimiter, wait: float) -> HTTPException:
    return HTTPException(429, f"client {client!r} sends more JSON values and keys to parse than "
                         f"parse_rate_per_client={budget.rate:g} per second; retry in {wait:.1f} s",
                         headers={"Retry-After": str(max(1, math.ceil(wait)))})


class _OffLoopRoute(APIRoute):
    """The API's routes: their JSON bodies are parsed off the event loop (`_OffLoopJSON`)."""

    def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            return await handler(_OffLoopJSON(request.scope, request.receive))

        return route


WAIT_CHUNK = 128
"""Jobs serialised per step of a long poll's answer (`_jobs_json`)."""


async def _jobs_json(found: list, missing: list[str], hold) -> AsyncIterator[bytes]:
    """`JobsOut` as JSON, ``WAIT_CHUNK`` jobs at a time in a worker thread, so 4,096 results (about
    20 MB) never hold the event loop for the second their encoding takes; ``hold`` (the client's
    long-poll slot) is given back once the answer is sent or its reader is gone."""
    try:
        yield b'{"jobs":['
        for start in range(0, len(found), WAIT_CHUNK):
            part = await run_in_threadpool(_encode_jobs, found[start:start + WAIT_CHUNK])
            yield (b"," if start else b"") + part
        yield b'],"missing":' + json.dumps(missing).encode() + b"}"
    finally:
        hold.__exit__(None, None, None)


def _encode_jobs(jobs: list) -> bytes:
    return b",".join(JobOut.from_job(j).model_dump_json().encode() for j in jobs)


HEALTH_COUNTS_S = 1.0
"""How long health reuses the store's job counts: it is open and not rate limited (`gate.Gate`), so a
flood of it reads the store at most once a second."""


async def _recent_counts(state: Any, store: Any) -> dict[str, int]:
    """The store's job counts, read at most once every `HEALTH_COUNTS_S` (kept on ``state``)."""
    t, counts = getattr(state, "health_counts", (-math.inf, None))
    if counts is None or time.monotonic() - t > HEALTH_COUNTS_S:
        counts = await run_in_threadpool(store.counts)
        state.health_counts = (time.monotonic(), counts)
    return counts


def _status_routes(r: APIRouter, config: ServiceConfig) -> None:
    """Health (no auth), workers and the queue."""

    @r.get("/health", response_model=HealthOut, responses={503: {"model": HealthOut}},
           summary="Liveness and readiness (no auth): 503 while no worker serves")
    async def health(request: Request):
        s = getattr(request.app.state, "scheduler", None)
        if s is None:
            return _error(503, "starting", "the service is starting")
        serving, total = s.serving_workers(), len(s.workers)
        counts = await _recent_counts(request.app.state, s.store)
        state = "ok" if serving == total else ("degraded" if serving else "down")
        out = HealthOut(
            status=state, version=__version__, workers_ready=serving, workers_total=total,
            queue_depth=counts["queued"], max_batch=config.max_batch,
            custom_problems=config.allow_custom_problems,
        )
        return JSONResponse(out.model_dump(), status_code=503 if state == "down" else 200)

    @r.get("/workers", summary="Device workers with their state and load")
    async def workers(request: Request) -> list[dict]:
        return sched(request).workers_view()

    @r.get("/queue", response_model=QueueOut, summary="Jobs per status (the whole service)")
    async def queue(request: Request) -> QueueOut:
        counts = await run_in_threadpool(sched(request).store.counts)
        return QueueOut(counts=counts, depth=counts["queued"])
