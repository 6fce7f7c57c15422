"""The ASGI gate in front of the API: who is calling, how fast, and how much they send, decided
before a byte of the body is parsed.

Order: the client is identified from its bearer token (401 otherwise, body unread), its request
rate is checked (429 with ``Retry-After``), then the body is read up to the size limit (413 for a
larger one, whether it declared its length or streamed it chunked) and within the body deadline (408
for one still arriving then), and replayed to the app.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from fastapi.responses import JSONResponse

CLIENT_SCOPE_KEY = "kernelgym.client"
OPEN_PATHS = frozenset({"/v1/health", "/metrics", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"})


def client_of(scope) -> str:
    """The authenticated client of a request (set by `Gate`; every guarded route has one)."""
    return scope[CLIENT_SCOPE_KEY]


@dataclass
class _Bucket:
    tokens: float
    last: float


class RateLimiter:
    """A token bucket per client: ``burst`` requests at once, ``rate`` per second on average."""

    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, burst
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, client: str) -> float:
        """0 when the request may pass; else seconds until it could."""
        now = time.monotonic()
        with self._lock:
            b = self._buckets.setdefault(client, _Bucket(float(self.burst), now))
            b.tokens = min(float(self.burst), b.tokens + (now - b.last) * self.rate)
            b.last = now
            if b.tokens >= 1.0:
                b.tokens -= 1.0
                return 0.0
            return (1.0 - b.tokens) / self.rate


class Gate:
    """ASGI middleware: authentication, rate limit and body size (see the module docstring).
    ``lookup(token)`` names the client of a token (None: unknown)."""

    def __init__(self, app, lookup: Callable[[str], str | None], limiter: RateLimiter, max_body: int,
                 body_timeout_s: float = 60.0):
        self.app, self.lookup, self.limiter, self.max_body = app, lookup, limiter, max_body
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        if path.startswith("/v1/") and path not in OPEN_PATHS:
            client = self._authenticate(scope)
            if client is None:
                return await _reply(send, 401, "unauthorized", "missing or unknown bearer token",
                                    {"WWW-Authenticate": "Bearer"})
            wait = self.limiter.take(client)
            if wait > 0:
                return await _reply(send, 429, "rate_limited", f"request rate of client {client!r} exceeded",
                                    {"Retry-After": str(max(1, math.ceil(wait)))})
            scope[CLIENT_SCOPE_KEY] = client
        if path in OPEN_PATHS or scope.get("method") in BODILESS:
            # no route here reads a body: one declared is refused at once, none is waited for (a slow
            # body on an open route would hold a connection without a token)
            if _declares_body(scope):
                return await _reply(send, 413, "request_too_large", "this route takes no request body",
                                    {"Connection": "close"})
            return await self.app(scope, receive, send)
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await self._read_body(scope, receive)
        except TimeoutError:
            return await _reply(send, 408, "request_timeout",
                                f"the request body did not arrive within {self.body_timeout_s:g} s",
                                {"Connection": "close"})
        if body is None:
            return await _reply(send, 413, "request_too_large", f"request body exceeds {self.max_body} bytes")
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: http.disconnect when the client leaves

        await self.app(scope, replay, send)

    def _authenticate(self, scope) -> str | None:
        header = b""
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                header = value
                break
        scheme, _, given = header.decode("latin-1").partition(" ")
        if not hmac.compare_digest(scheme.lower().encode(), b"bearer") or not given.strip():
            return None
        return self.lookup(given.strip())

    async def _read_body(self, scope, receive) -> bytes | None:
        """The whole body, or None once it passes the limit (declared or counted)."""
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                return None
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b""  # the client left; the app answers into the void
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


BODILESS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def _declares_body(scope) -> bool:
    """Does the request head announce a body (a nonzero length, or chunks)?"""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


async def _reply(send, code: int, error: str, detail: str, headers: dict[str, str] | None = None) -> None:
    response = JSONResponse({"error": error, "detail": detail}, status_code=code, headers=headers)
    await response({"type": "http"}, None, send)


