"""The ASGI gate in front of the API: who is calling, how fast, and how much they send, decided
before a byte of the body is parsed.

Order, from the request head alone: every path but the open ones (known route or not) needs a bearer
token naming a client (401 otherwise), the client's request rate is checked (429 with
``Retry-After``), and a body is refused at once (413) unless a route that reads one matches the path
and method. Only then is the body read, up to the size limit (413 for a larger one, whether it
declared its length or streamed it chunked) and within the body deadline (408 for one still arriving
then), and replayed to the app. A refusal of a request that announced a body closes the connection
(the body is never read), so no client without a token holds a socket or a byte of memory for one.

What needs no token is paid for by the peer address: every request that does not carry a token
verified in the last ``token_ttl_s`` (the open route ``/metrics`` and the docs, unknown or missing
tokens, a token's first use) takes from a bucket of its peer address, and past it is a 429 before any
lookup, and then from one bucket of the whole server (``rate_unverified``), so many addresses are no
more than one server's worth. Two are not: ``/v1/health`` (its answer is cached for a second, so it
costs no lookup) and the re-check of a token that named a client at its last lookup (a client's own
request; a token found removed pays again). So anonymous floods from an address a client shares, a
/24 behind one proxy, neither fail health nor refuse that client. A verified token is kept in memory
(`TokenCache`) for ``token_ttl_s``, so a client's requests never wait for the store, and a lookup that
must read it runs in a thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Sequence

from fastapi.responses import JSONResponse
from starlette.routing import BaseRoute, Match

CLIENT_SCOPE_KEY = "kernelgym.client"
HEALTH_PATH = "/v1/health"
OPEN_PATHS = frozenset({HEALTH_PATH, "/metrics", "/docs", "/openapi.json", "/docs/oauth2-redirect", "/redoc"})


def client_of(scope) -> str:
    """The authenticated client of a request (set by `Gate`; every guarded route has one)."""
    return scope[CLIENT_SCOPE_KEY]


@dataclass
class _Bucket:
    tokens: float
    last: float


class RateLimiter:
    """A token bucket per key (a client, a peer address): ``burst`` at once, ``rate`` per second on
    average. At most ``max_keys`` buckets are kept (the least recently used one is dropped: a key seen
    again starts full), so keys a client can vary (addresses) cannot grow it without bound."""

    def __init__(self, rate: float, burst: int, max_keys: int = 65536):
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, cost: float = 1) -> float:
        """0 when ``cost`` may pass now (it is taken); else seconds until it could (nothing taken)."""
        with self._lock:
            b = self._refilled(key)
            if b.tokens >= cost:
                b.tokens -= cost
                return 0.0
            return (cost - b.tokens) / self.rate

    def charge(self, key: str, cost: float) -> None:
        """Take ``cost`` after the fact, whatever is left: the bucket may go below zero, a debt that
        `take` (of 0 or more) then waits out. For a cost known only once the work is done (the bytes
        a read returned: `app.AnswerBudget`)."""
        with self._lock:
            self._refilled(key).tokens -= cost

    def _refilled(self, key: str) -> _Bucket:
        """With the lock held: ``key``'s bucket, refilled to now and made the most recently used."""
        now = time.monotonic()
        b = self._buckets.pop(key, None) or _Bucket(float(self.burst), now)
        self._buckets[key] = b
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        b.tokens = min(float(self.burst), b.tokens + (now - b.last) * self.rate)
        b.last = now
        return b


TOKEN_TTL_S = 10.0
"""How long a verified token is trusted without the store, by default (`ServiceConfig.token_ttl_s`)."""


class TokenCache:
    """Clients of verified tokens, kept ``ttl_s`` in memory (keyed by the token's sha256; unknown
    tokens are never kept, so its size is bounded by the tokens that exist). ``lookup(token)`` reads
    the store; `resolve` runs it in a thread, off the event loop."""

    def __init__(self, lookup: Callable[[str], str | None], ttl_s: float = TOKEN_TTL_S):
        self.lookup, self.ttl_s = lookup, ttl_s
        self._known: dict[str, tuple[str, float]] = {}
        self._verified: set[str] = set()  # tokens the store knew at their last lookup (bounded likewise)

    def was_verified(self, token: str) -> bool:
        """Whether ``token`` named a client at its last lookup: its re-check after ``ttl_s`` is a
        client's, not an anonymous request's (no I/O)."""
        return self._key(token) in self._verified

    @staticmethod
    def _key(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def cached(self, token: str) -> str | None:
        """The client of ``token`` if it was verified less than ``ttl_s`` ago (no I/O)."""
        hit = self._known.get(self._key(token))
        if hit is None or hit[1] < time.monotonic():
            return None
        return hit[0]

    async def resolve(self, token: str) -> str | None:
        """The client of ``token`` from the store (None: unknown), remembered when known."""
        client = await asyncio.to_thread(self.lookup, token)
        key = self._key(token)
        if client is None:
            self._verified.discard(key)  # removed: its next request is anonymous again
            return None
        now = time.monotonic()
        self._known = {k: v for k, v in self._known.items() if v[1] >= now}  # drop lapsed entries
        self._known[key] = (client, now + self.ttl_s)
        self._verified.add(key)
        return client


class _Body:
    """One request body held in memory: its client, the bytes it took, and ``cut``, set when
    `BodyBudget` takes its bytes back for a client holding less (its reader then answers 503)."""

    __slots__ = ("client", "held", "cut")

    def __init__(self, client: str) -> None:
        self.client, self.held, self.cut = client, 0, asyncio.Event()


class BodyBudget:
    """Bytes of request bodies held in memory: at most ``total`` for all clients, and for one client
    ``per_client`` and its share of ``total``: ``total // (h + 1)`` with ``h`` the clients holding bodies
    (itself included), so a share is left for a newcomer. A body takes its bytes as
    they arrive and gives them back when its request is answered. When ``total`` is full, a client
    taking bytes within its share cuts the newest body of the client holding most, if that one holds
    more than it would (hostile round 15, A12: four identities stalling 32-MiB bodies held all 256 MiB
    and every other client's POST was 503 ``bodies_in_flight`` for 70 s)."""

    def __init__(self, total: int, per_client: int) -> None:
        self.total, self.per_client = total, per_client
        self.held = 0
        self.by_client: dict[str, int] = {}
        self.bodies: dict[str, list[_Body]] = {}
        self.cut = 0
        """Bodies cut so far for a client holding less."""

    def share(self, client: str) -> int:
        """What ``client`` may hold now: ``per_client``, and at most its share of ``total``."""
        holders = len(self.by_client) + (client not in self.by_client)
        return min(self.per_client, self.total // (holders + 1))

    def take(self, body: _Body, n: int) -> str | None:
        """Take ``n`` bytes for ``body``; None when taken, else which limit refused them."""
        mine = self.by_client.get(body.client, 0) + n
        if mine > self.share(body.client):
            return "client"
        while self.held + n > self.total:
            victim = max(self.by_client, key=self.by_client.__getitem__, default=None)
            if victim is None or self.by_client[victim] <= mine:
                return "server"
            self._cut(self.bodies[victim][-1])
        self.held += n
        self.by_client[body.client] = self.by_client.get(body.client, 0) + n
        body.held += n
        if body not in self.bodies.setdefault(body.client, []):
            self.bodies[body.client].append(body)
        return None

    def _cut(self, body: _Body) -> None:
        """Take ``body``'s bytes back now; its reader sees ``cut`` and answers 503."""
        self.cut += 1
        body.cut.set()
        self.give_back(body)

    def give_back(self, body: _Body) -> None:
        n, body.held = body.held, 0
        held = self.bodies.get(body.client, [])
        if body in held:
            held.remove(body)
        if not held:
            self.bodies.pop(body.client, None)
        self.held -= n
        left = self.by_client.get(body.client, 0) - n
        if left > 0:
            self.by_client[body.client] = left
        else:
            self.by_client.pop(body.client, None)


ANONYMOUS = "*"
"""The key of `Gate.anonymous`: one bucket for every request without a verified token, whatever its
peer (hostile round 15, A11: floods from rotating 127.x.y.z addresses met no per-peer bucket twice
and got 10,243 answers of 401 and none of 429)."""


class Gate:
    """ASGI middleware: authentication, rate limits and body size (see the module docstring).
    ``lookup(token)`` names the client of a token (None: unknown); ``limiter`` is per client,
    ``peers`` per peer address (for whatever comes without a verified token); ``body_routes``: the
    routes that read a body (only theirs is read, and only for an authenticated client)."""

    def __init__(self, app, lookup: Callable[[str], str | None], limiter: RateLimiter, max_body: int,
                 body_timeout_s: float = 60.0, peers: RateLimiter | None = None,
                 token_ttl_s: float = TOKEN_TTL_S, body_routes: Sequence[BaseRoute] = (),
                 bodies_in_flight: int | None = None, anonymous: RateLimiter | None = None):
        self.app, self.limiter, self.max_body = app, limiter, max_body
        self.budget = BodyBudget(bodies_in_flight or 8 * max_body, 2 * max_body)
        self.body_routes = tuple(body_routes)
        self.tokens = TokenCache(lookup, token_ttl_s)
        self.body_timeout_s = body_timeout_s
        self.peers = peers or RateLimiter(20.0, 200)
        self.anonymous = anonymous or RateLimiter(200.0, 1000)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        open_route = path in OPEN_PATHS
        token = "" if open_route else _bearer(scope)
        client = self.tokens.cached(token) if token else None
        # no verified token: the peer address pays, before any lookup; not health (a cached answer, so a
        # flood of the other open routes from a shared address cannot make it fail) and not the re-check
        # of a token that named a client at its last lookup (hostile round 11: a flood of /metrics from
        # the client's own address refused its requests each time its token's cache lapsed)
        if client is None and path != HEALTH_PATH and not (token and self.tokens.was_verified(token)):
            wait = self.peers.take(_peer(scope))
            if wait > 0:
                return await _refuse(scope, send, 429, "rate_limited", "too many requests without a verified "
                                     "token from this address", {"Retry-After": str(max(1, math.ceil(wait)))})
            wait = self.anonymous.take(ANONYMOUS)  # all peers together (hostile round 15, A11)
            if wait > 0:
                return await _refuse(scope, send, 429, "rate_limited", "too many requests without a verified "
                                     "token to this server", {"Retry-After": str(max(1, math.ceil(wait)))})
        if not open_route:  # every other path, known or not, is a client's: decided from the head alone
            if client is None and token:
                client = await self.tokens.resolve(token)
            if client is None:
                return await _refuse(scope, send, 401, "unauthorized", "missing or unknown bearer token",
                                     {"WWW-Authenticate": "Bearer"})
            wait = self.limiter.take(client)
            if wait > 0:
                return await _refuse(scope, send, 429, "rate_limited", f"request rate of client {client!r} "
                                     "exceeded", {"Retry-After": str(max(1, math.ceil(wait)))})
            scope[CLIENT_SCOPE_KEY] = client
        if not self._takes_body(scope):
            # no body is read or waited for here (a slow one would hold a connection): one declared is
            # refused at once
            if _declares_body(scope):
                return await _refuse(scope, send, 413, "request_too_large", "this route takes no request body")
            return await self.app(scope, receive, send)
        held = _Body(scope.get(CLIENT_SCOPE_KEY, ""))
        try:
            await self._answer_with_body(scope, receive, send, held)
        finally:
            self.budget.give_back(held)

    async def _answer_with_body(self, scope, receive, send, held: _Body) -> None:
        """Read the body within its deadline and the budget, then hand it to the app."""
        try:
            async with asyncio.timeout(self.body_timeout_s):
                body = await self._read_body(scope, receive, held)
        except TimeoutError:
            return await _reply(send, 408, "request_timeout",
                                f"the request body did not arrive within {self.body_timeout_s:g} s",
                                {"Connection": "close"})
        if isinstance(body, str):
            who = "this client's share of the" if body == "client" else "the server's"
            return await _reply(send, 503, "bodies_in_flight", f"request bodies in memory exceed {who} budget; "
                                "retry later", {"Connection": "close", "Retry-After": "1"})
        if body is None:
            return await _reply(send, 413, "request_too_large", f"request body exceeds {self.max_body} bytes",
                                {"Connection": "close"})
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: http.disconnect when the client leaves

        await self.app(scope, replay, send)

    def _takes_body(self, scope) -> bool:
        """Does a route that reads a request body match this path and method?"""
        return any(r.matches(scope)[0] is Match.FULL for r in self.body_routes)

    async def _read_body(self, scope, receive, held: _Body) -> bytes | str | None:
        """The whole body; None once it passes the limit (declared or counted); ``"client"`` or
        ``"server"`` when a chunk would pass that `BodyBudget`, or the budget cut the body for a client
        holding less (``held``: the body's bytes taken from it)."""
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_body:
                return None
        chunks, seen = [], 0
        while True:
            message = await _unless_cut(receive, held.cut)
            if message is None:
                return "server"
            if message["type"] != "http.request":
                return b""  # the client left; the app answers into the void
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body:
                return None
            refused = self.budget.take(held, len(chunk))
            if refused:
                return refused
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _unless_cut(receive, cut: asyncio.Event):
    """The next ASGI message, or None once ``cut`` is set (the body's bytes were taken back)."""
    if cut.is_set():
        return None
    got, stop = asyncio.ensure_future(receive()), asyncio.ensure_future(cut.wait())
    try:
        await asyncio.wait((got, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not got.done():
            got.cancel()
    return None if cut.is_set() and not got.done() else got.result()


def _bearer(scope) -> str:
    """The bearer token of a request ("" when there is none)."""
    header = b""
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            header = value
            break
    scheme, _, given = header.decode("latin-1").partition(" ")
    if not hmac.compare_digest(scheme.lower().encode(), b"bearer"):
        return ""
    return given.strip()


PEER_PREFIX_V4, PEER_PREFIX_V6 = 24, 64
"""The networks one peer bucket covers: a remote host owns many addresses (an IPv6 /64, often a /24
behind one NAT), so a bucket per address is a bucket per address the client cares to use. Loopback
addresses keep a bucket each: a client on the server's own host is not whom these limits stop (it
shares the disk, the CPU and the GPU already), and tests tell clients apart by them."""


def _peer(scope) -> str:
    """The peer network a request comes from (`PEER_PREFIX_V4`/`_V6`; a loopback address alone)."""
    peer = scope.get("client")
    if not peer:
        return "unknown"
    try:
        address = ipaddress.ip_address(str(peer[0]))
    except ValueError:  # a Unix socket's path, a test client's name
        return str(peer[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return str(address)
    prefix = PEER_PREFIX_V4 if address.version == 4 else PEER_PREFIX_V6
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


BODILESS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})


def _declares_body(scope) -> bool:
    """Does the request head announce a body (a nonzero length, or chunks)?"""
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value.strip() not in (b"", b"0")):
            return True
    return False


async def _refuse(scope, send, code: int, error: str, detail: str, headers: dict[str, str] | None = None) -> None:
    """A refusal from the head alone; a body it announced is never read, so the connection closes."""
    if _declares_body(scope):
        headers = {**(headers or {}), "Connection": "close"}
    await _reply(send, code, error, detail, headers)


async def _reply(send, code: int, error: str, detail: str, headers: dict[str, str] | None = None) -> None:
    response = JSONResponse({"error": error, "detail": detail}, status_code=code, headers=headers)
    await response({"type": "http"}, None, send)


