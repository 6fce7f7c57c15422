"""Clients of the KernelGym service.

* `ServiceClient` (sync) and `AsyncServiceClient` (asyncio): submit, batch, long-poll, cancel,
  inspect. Every submission carries an idempotency key (generated when not given), so a request
  retried after a lost response never makes a second job. Connection errors and 429/502/503/504
  are retried with exponential backoff and jitter.
* `ServiceEvaluator`: the gym's `Evaluator` protocol over the service, so the agent and the trainer
  hold an evaluator without caring whether it runs in-process or remotely.

A job that the service failed (our infrastructure, twice) raises `ServiceError`; a bad solution is
an `EvalResult` like any other.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import httpx

from drkernel.errors import ServiceError
from drkernel.gym.config import EvalRequest
from drkernel.gym.result import EvalResult

RETRY_STATUS = {429, 502, 503, 504}
TERMINAL = {"done", "failed", "cancelled"}
SUBMIT_CHUNK = 500
WAIT_CHUNK = 1000

__all__ = ["AsyncServiceClient", "JobInfo", "ServiceClient", "ServiceEvaluator"]


@dataclass(frozen=True)
class JobInfo:
    """A job as the service reports it."""

    id: str
    status: str
    attempts: int
    cached: bool
    error: str | None
    error_class: str | None
    worker: str | None
    result: EvalResult | None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "JobInfo":
        return cls(
            id=d["id"],
            status=d["status"],
            attempts=d["attempts"],
            cached=d["cached"],
            error=d.get("error"),
            error_class=d.get("error_class"),
            worker=d.get("worker"),
            result=EvalResult.from_dict(d["result"]) if d.get("result") else None,
        )

    def unwrap(self) -> EvalResult:
        """The result; `ServiceError` when the job failed or was cancelled."""
        if self.status == "done" and self.result is not None:
            return self.result
        raise ServiceError(
            f"job {self.id} {self.status}: {self.error_class or ''} {self.error or ''}".rstrip()
        )


def _payload(request: EvalRequest, key: str | None, priority: int) -> dict[str, Any]:
    """The request body: the problem by key (the server uses its own copy of a problem it loaded),
    with its code for a server that accepts custom problems."""
    return {
        **request.to_dict(),
        "problem_key": request.problem.key,
        "idempotency_key": key or uuid.uuid4().hex,
        "priority": priority,
    }


def _keys(n: int, keys: Sequence[str] | None) -> list[str | None]:
    if keys is not None and len(keys) != n:
        raise ValueError(f"{len(keys)} idempotency keys for {n} requests")
    return list(keys) if keys is not None else [None] * n


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        body = response.json()
        text = f"{body.get('error', '')}: {body.get('detail', '')}"
    except ValueError:
        text = response.text[:500]
    if response.status_code == 401:
        text += (f" (give the client's token with --token or ${TOKEN_ENV}: `drkernel gym token add NAME` "
                 f"prints a new one; a single-user server on this machine writes its token to "
                 f"{local_token_file()})")
    raise ServiceError(
        f"{response.request.method} {response.request.url.path} -> {response.status_code} {text}"
    )


class _Backoff:
    def __init__(self, retries: int, base_s: float, max_s: float):
        self.retries, self.base_s, self.max_s = retries, base_s, max_s

    def delay(self, attempt: int) -> float:
        return min(self.max_s, self.base_s * 2**attempt) * (0.5 + random.random() / 2)


TOKEN_ENV = "KERNELGYM_TOKEN"


LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def local_token_file() -> Path:
    """Where a single-user server with the default store writes its token."""
    from drkernel.service.config import default_db_path

    return Path(f"{default_db_path()}.token")


def _headers(token: str | None, url: str) -> dict[str, str]:
    """The bearer header; no ``token``: the one in ``$KERNELGYM_TOKEN``, else, for a server on this
    machine (a loopback ``url``) alone, the token a single-user server wrote to `local_token_file`
    (never sent anywhere else)."""
    token = token or os.environ.get(TOKEN_ENV)
    if not token and httpx.URL(url).host in LOOPBACK:
        try:
            token = local_token_file().read_text().strip()
        except OSError:
            token = None
    return {"Authorization": f"Bearer {token}"} if token else {}


def _progress(total: int, enabled: bool, label: str):
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )  # stdout stays clean for results
    progress.start()
    return progress, progress.add_task(label, total=total)


class ServiceClient:
    """Synchronous client. ``url``: e.g. ``http://gym-host:8765``."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 6,
        backoff_s: float = 0.25,
        max_backoff_s: float = 5.0,
        poll_s: float = 2.0,
    ):
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=_headers(token, url), timeout=timeout_s)
        self._backoff = _Backoff(retries, backoff_s, max_backoff_s)
        self.poll_s = poll_s
        self._max_batch: int | None = None

    def _chunk(self, n: int) -> int:
        if self._max_batch is None:
            self._max_batch = int(self.health().get("max_batch", n))
        return min(n, self._max_batch)

    def __enter__(self) -> "ServiceClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, accept: tuple[int, ...] = (), **kw) -> Any:
        """``accept``: error statuses whose body is the answer (health's 503 report)."""
        for attempt in range(self._backoff.retries + 1):
            last = attempt == self._backoff.retries
            try:
                response = self._http.request(method, path, **kw)
            except httpx.TransportError as e:
                if last:
                    raise ServiceError(f"{method} {path}: service unreachable: {e!r}") from e
            else:
                if response.status_code in accept:
                    return response.json()
                if response.status_code not in RETRY_STATUS or last:
                    _raise_for(response)
                    return response.json()
            time.sleep(self._backoff.delay(attempt))
        raise AssertionError("unreachable")

    def submit(self, request: EvalRequest, idempotency_key: str | None = None, priority: int = 0) -> str:
        return self._call("POST", "/v1/jobs", json=_payload(request, idempotency_key, priority))["id"]

    def submit_batch(
        self,
        requests: Sequence[EvalRequest],
        idempotency_keys: Sequence[str] | None = None,
        priority: int = 0,
    ) -> list[str]:
        keys = _keys(len(requests), idempotency_keys)
        ids: list[str] = []
        n = self._chunk(SUBMIT_CHUNK)
        for i in range(0, len(requests), n):
            body = {
                "requests": [_payload(r, k, priority) for r, k in zip(requests[i : i + n], keys[i : i + n])]
            }
            ids += [j["id"] for j in self._call("POST", "/v1/jobs/batch", json=body)["jobs"]]
        return ids

    def job(self, job_id: str) -> JobInfo:
        return JobInfo.from_json(self._call("GET", f"/v1/jobs/{job_id}"))

    def wait(self, job_id: str, timeout_s: float = 30.0) -> JobInfo:
        return JobInfo.from_json(
            self._call(
                "GET", f"/v1/jobs/{job_id}/wait", params={"timeout": timeout_s}, timeout=timeout_s + 30.0
            )
        )

    def wait_many(self, ids: Sequence[str], timeout_s: float = 30.0) -> dict[str, JobInfo]:
        out = self._call(
            "POST", "/v1/jobs/wait", json={"ids": list(ids), "timeout": timeout_s}, timeout=timeout_s + 30.0
        )
        if out["missing"]:
            raise ServiceError(f"the service does not know jobs {out['missing'][:5]}")
        return {j["id"]: JobInfo.from_json(j) for j in out["jobs"]}

    def cancel(self, job_id: str) -> JobInfo:
        return JobInfo.from_json(self._call("DELETE", f"/v1/jobs/{job_id}"))

    def results(
        self, ids: Sequence[str], timeout_s: float | None = None, progress: bool = False
    ) -> list[EvalResult]:
        """Long-poll until every job is terminal; results in ``ids`` order."""
        infos = self.collect(ids, timeout_s, progress)
        return [infos[i].unwrap() for i in ids]

    def collect(
        self, ids: Sequence[str], timeout_s: float | None = None, progress: bool = False
    ) -> dict[str, JobInfo]:
        """Long-poll until every job is terminal (or ``timeout_s``); the jobs by id."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        remaining, done = list(dict.fromkeys(ids)), {}
        bar = _progress(len(remaining), progress, "evaluations")
        try:
            while remaining:
                left = self.poll_s if deadline is None else min(self.poll_s, deadline - time.monotonic())
                if left <= 0:
                    raise ServiceError(f"{len(remaining)} job(s) not finished within {timeout_s} s")
                n = self._chunk(WAIT_CHUNK)
                for i in range(0, len(remaining), n):
                    got = self.wait_many(remaining[i : i + n], left)
                    done.update({k: v for k, v in got.items() if v.terminal})
                remaining = [i for i in remaining if i not in done]
                if bar:
                    bar[0].update(bar[1], completed=len(done))
        finally:
            if bar:
                bar[0].stop()
        return done

    def evaluate(self, request: EvalRequest, timeout_s: float | None = None) -> EvalResult:
        return self.results([self.submit(request)], timeout_s)[0]

    def evaluate_many(
        self, requests: Sequence[EvalRequest], timeout_s: float | None = None, progress: bool = False
    ) -> list[EvalResult]:
        return self.results(self.submit_batch(requests), timeout_s, progress)

    def health(self) -> dict[str, Any]:
        """The health report; a service that is down answers 503 with the same report (returned)."""
        return self._call("GET", "/v1/health", accept=(503,))

    def workers(self) -> list[dict[str, Any]]:
        return self._call("GET", "/v1/workers")

    def queue(self) -> dict[str, Any]:
        return self._call("GET", "/v1/queue")


class AsyncServiceClient:
    """Asyncio client with the same methods as `ServiceClient`, awaitable."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 6,
        backoff_s: float = 0.25,
        max_backoff_s: float = 5.0,
        poll_s: float = 2.0,
    ):
        self._http = httpx.AsyncClient(base_url=url.rstrip("/"), headers=_headers(token, url), timeout=timeout_s)
        self._backoff = _Backoff(retries, backoff_s, max_backoff_s)
        self.poll_s = poll_s
        self._max_batch: int | None = None

    async def _chunk(self, n: int) -> int:
        if self._max_batch is None:
            self._max_batch = int((await self.health()).get("max_batch", n))
        return min(n, self._max_batch)

    async def __aenter__(self) -> "AsyncServiceClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, accept: tuple[int, ...] = (), **kw) -> Any:
        """``accept``: error statuses whose body is the answer (health's 503 report)."""
        for attempt in range(self._backoff.retries + 1):
            last = attempt == self._backoff.retries
            try:
                response = await self._http.request(method, path, **kw)
            except httpx.TransportError as e:
                if last:
                    raise ServiceError(f"{method} {path}: service unreachable: {e!r}") from e
            else:
                if response.status_code in accept:
                    return response.json()
                if response.status_code not in RETRY_STATUS or last:
                    _raise_for(response)
                    return response.json()
            await asyncio.sleep(self._backoff.delay(attempt))
        raise AssertionError("unreachable")

    async def submit(
        self, request: EvalRequest, idempotency_key: str | None = None, priority: int = 0
    ) -> str:
        return (await self._call("POST", "/v1/jobs", json=_payload(request, idempotency_key, priority)))["id"]

    async def submit_batch(
        self,
        requests: Sequence[EvalRequest],
        idempotency_keys: Sequence[str] | None = None,
        priority: int = 0,
    ) -> list[str]:
        keys = _keys(len(requests), idempotency_keys)
        ids: list[str] = []
        n = await self._chunk(SUBMIT_CHUNK)
        for i in range(0, len(requests), n):
            body = {
                "requests": [_payload(r, k, priority) for r, k in zip(requests[i : i + n], keys[i : i + n])]
            }
            ids += [j["id"] for j in (await self._call("POST", "/v1/jobs/batch", json=body))["jobs"]]
        return ids

    async def job(self, job_id: str) -> JobInfo:
        return JobInfo.from_json(await self._call("GET", f"/v1/jobs/{job_id}"))

    async def wait(self, job_id: str, timeout_s: float = 30.0) -> JobInfo:
        return JobInfo.from_json(
            await self._call(
                "GET", f"/v1/jobs/{job_id}/wait", params={"timeout": timeout_s}, timeout=timeout_s + 30.0
            )
        )

    async def wait_many(self, ids: Sequence[str], timeout_s: float = 30.0) -> dict[str, JobInfo]:
        out = await self._call(
            "POST", "/v1/jobs/wait", json={"ids": list(ids), "timeout": timeout_s}, timeout=timeout_s + 30.0
        )
        if out["missing"]:
            raise ServiceError(f"the service does not know jobs {out['missing'][:5]}")
        return {j["id"]: JobInfo.from_json(j) for j in out["jobs"]}

    async def cancel(self, job_id: str) -> JobInfo:
        return JobInfo.from_json(await self._call("DELETE", f"/v1/jobs/{job_id}"))

    async def collect(
        self, ids: Sequence[str], timeout_s: float | None = None, progress: bool = False
    ) -> dict[str, JobInfo]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        remaining, done = list(dict.fromkeys(ids)), {}
        bar = _progress(len(remaining), progress, "evaluations")
        try:
            while remaining:
                left = self.poll_s if deadline is None else min(self.poll_s, deadline - time.monotonic())
                if left <= 0:
                    raise ServiceError(f"{len(remaining)} job(s) not finished within {timeout_s} s")
                n = await self._chunk(WAIT_CHUNK)
                chunks = [remaining[i : i + n] for i in range(0, len(remaining), n)]
                for got in await asyncio.gather(*(self.wait_many(c, left) for c in chunks)):
                    done.update({k: v for k, v in got.items() if v.terminal})
                remaining = [i for i in remaining if i not in done]
                if bar:
                    bar[0].update(bar[1], completed=len(done))
        finally:
            if bar:
                bar[0].stop()
        return done

    async def results(
        self, ids: Sequence[str], timeout_s: float | None = None, progress: bool = False
    ) -> list[EvalResult]:
        infos = await self.collect(ids, timeout_s, progress)
        return [infos[i].unwrap() for i in ids]

    async def evaluate(self, request: EvalRequest, timeout_s: float | None = None) -> EvalResult:
        return (await self.results([await self.submit(request)], timeout_s))[0]

    async def evaluate_many(
        self, requests: Sequence[EvalRequest], timeout_s: float | None = None, progress: bool = False
    ) -> list[EvalResult]:
        return await self.results(await self.submit_batch(requests), timeout_s, progress)

    async def health(self) -> dict[str, Any]:
        """The health report; a service that is down answers 503 with the same report (returned)."""
        return await self._call("GET", "/v1/health", accept=(503,))

    async def workers(self) -> list[dict[str, Any]]:
        return await self._call("GET", "/v1/workers")

    async def queue(self) -> dict[str, Any]:
        return await self._call("GET", "/v1/queue")


class ServiceEvaluator:
    """The `drkernel.gym.protocol.Evaluator` interface over a KernelGym service."""

    def __init__(self, url: str, token: str | None = None, progress: bool = False, **client_kwargs: Any):
        self.url, self.token, self.progress = url, token, progress
        self._client_kwargs = client_kwargs
        self._sync = ServiceClient(url, token, **client_kwargs)

    def evaluate(self, request: EvalRequest) -> EvalResult:
        return self._sync.evaluate(request)

    async def evaluate_batch(self, requests: Sequence[EvalRequest]) -> list[EvalResult]:
        async with AsyncServiceClient(self.url, self.token, **self._client_kwargs) as client:
            return await client.evaluate_many(list(requests), progress=self.progress)

    def close(self) -> None:
        self._sync.close()
