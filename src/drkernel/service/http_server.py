"""The HTTP server in front of the app: uvicorn's h11 protocol with deadlines and a connection cap.

What a client that never finishes a request can hold, before any token is read:

* a connection whose request head is not complete ``head_timeout_s`` after it opened (or after its
  previous response) is closed: a slow or silent client keeps no socket (the body has a deadline of
  its own in `gate.Gate`);
* at most ``max_connections`` connections are open; a new one over the cap evicts the unfinished
  request that made the least progress (`GuardedH11.eviction_rank`): a connection that never sent a
  byte first, then one idle after a response, then one with its head part-way, and a body still
  arriving last (the slowest first), within each the one from the peer holding most connections
  first; never one whose request is complete and being served, and the new one itself is refused when
  there is none. So half-sent requests, with or without a token, cannot lock others out, and a flood
  of bare connections cuts no upload that is progressing (hostile round 15, A13: bare connections at
  1300/s cut 3 of 3 honest 516-KB uploads at 64 KB/s when the oldest unfinished request went first);
* a request head is at most ``MAX_HEAD_BYTES``, however it arrives (one write or many), and a request
  that frames its body twice (both Content-Length and Transfer-Encoding, which a proxy in front may
  read the other way: RFC 9112 6.1) is refused: either is a 400 and the connection closes
  (`_StrictHeads`);
* a request refused from its head (401, 413) whose body was never read is answered, then its
  connection lingers (what still arrives is dropped) for at most ``linger_s`` before it closes, so
  the client reads the answer instead of a reset (`_Lingering`);
* a response that its reader takes nothing of for ``write_timeout_s`` (the socket's buffers full) is
  dropped with its connection: a client that never reads holds no answer in the server's memory.

The access log is bounded too (`AccessLogLimit`): a request target is logged to ``MAX_LOGGED_TARGET``
characters, and a refusal for a token (401) or for rate (429) at most once per status per peer network
(the rate limiter's: `gate._peer`) per ``interval_s``, and so is any answer on a path that needs no token
(`OPEN_PATHS`: health, metrics, docs), so a flood of refused or open requests costs no disk, from however
many addresses of one network it comes, and at most `UNVERIFIED_LINES` such lines per interval from all
networks together (the number left out logged once per interval); uvicorn's warnings (malformed
connections) are logged at most once per message per ten seconds (`RepeatLimit`).

The listening socket is bound before the app starts, so a busy port fails before any device
worker is started.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import time
from collections import OrderedDict
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import Server

from drkernel.service.gate import _peer

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 16 * 1024
FD_RESERVE = 256
"""Descriptors kept for the store, the workers' pipes and logs (not given to connections)."""


class GuardedH11(H11Protocol):
    """`H11Protocol` with a deadline on each request head and the connection cap (module docstring).
    The limits are class attributes set by `bind_protocol`."""

    head_timeout_s: float = 10.0
    max_connections: int = 1000
    write_timeout_s: float = 30.0

    linger_s: float = 2.0
    bare: dict[str, dict["GuardedH11", None]] = {}
    """Connections that have not sent a byte yet, by peer, oldest first (one dict per bound class:
    `bind_protocol`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _StrictHeads(h11.SERVER, MAX_HEAD_BYTES)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_Lingering(transport, self))
        self.peer = _peer({"client": self.client}) if self.client else "unknown"
        self.bare.setdefault(self.peer, {})[self] = None
        self._arm_head_deadline()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def data_received(self, data: bytes) -> None:
        if not getattr(self, "bytes_in", 0):
            self._unbare()
        self.bytes_in = getattr(self, "bytes_in", 0) + len(data)
        if not getattr(self, "lingering", False):  # a refused request's body, after its answer: dropped
            super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unbare()
        for timer in (getattr(self, "_head_timer", None), getattr(self, "_write_timer", None)):
            if timer is not None:
                timer.cancel()
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if getattr(self, "_write_timer", None) is None:
            self._write_timer = self.loop.call_later(self.write_timeout_s, self._write_deadline)

    def resume_writing(self) -> None:
        timer = getattr(self, "_write_timer", None)
        if timer is not None:
            timer.cancel()
            self._write_timer = None
        super().resume_writing()

    def _write_deadline(self) -> None:
        """Nothing of the answer was taken for ``write_timeout_s``: drop it (``abort``, also when the
        transport is already closing: a ``close``, the keep-alive timeout's included, waits for the
        unsent bytes to drain first, which a reader that takes nothing never lets happen)."""
        self._write_timer = None
        self.transport.abort()

    @property
    def waiting_for_head(self) -> bool:
        return self.conn.their_state is h11.IDLE

    @property
    def request_unfinished(self) -> bool:
        """Still waiting for its head, or for the rest of a body."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def _arm_head_deadline(self) -> None:
        timer = getattr(self, "_head_timer", None)
        if timer is not None:
            timer.cancel()
        self.served = hasattr(self, "head_since")  # a response went out before: idle keep-alive
        self.head_since, self.bytes_in = time.monotonic(), 0
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_deadline)

    def _head_deadline(self) -> None:
        if self.waiting_for_head and not self.transport.is_closing():
            self.transport.close()

    def eviction_rank(self, peers: dict[str, int], now: float) -> tuple[int, int, float]:
        """Which unfinished request to close first over the cap (the largest): by progress, a
        connection that sent nothing since it opened (3), one idle after a response (2), a head
        part-way (1), a body arriving (0); then the peer holding most connections; then the longest
        waiting for its head, or for a body the slowest in bytes a second since its request began."""
        waited = max(now - self.head_since, 1e-3)
        if self.conn.their_state is h11.SEND_BODY:
            return 0, peers.get(self.peer, 0), -self.bytes_in / waited
        progress = 1 if self.bytes_in else 2 if getattr(self, "served", False) else 3
        return progress, peers.get(self.peer, 0), waited

    def _unbare(self) -> None:
        """This connection sent its first byte, or closed: no longer among `bare`."""
        mine = self.bare.get(getattr(self, "peer", ""))
        if mine is not None and mine.pop(self, 0) is None and not mine:
            del self.bare[self.peer]

    def _make_room(self) -> None:
        """Close the unfinished request that made the least progress (`eviction_rank`); this
        connection when there is none. The first rank, connections that never sent a byte, is kept by
        peer (`bare`), so a flood of them (round 15, A13: 1,300 a second) costs no scan of the rest."""
        counts = {p: len(d) - (self in d) for p, d in self.bare.items()}
        for p in sorted(counts, key=counts.__getitem__, reverse=True):
            for c in self.bare[p]:
                if c is not self and not c.transport.is_closing():
                    c.transport.close()
                    return
        waiting = [c for c in self.connections if isinstance(c, GuardedH11) and c is not self
                   and c.request_unfinished and not c.transport.is_closing()]
        peers: dict[str, int] = {}
        for c in waiting:
            peers[c.peer] = peers.get(c.peer, 0) + 1
        now = time.monotonic()
        victim = max(waiting, key=lambda c: c.eviction_rank(peers, now), default=self)
        victim.transport.close()


MANY_CHUNKS = 256
MIN_CHUNK_BYTES = 256
"""A body still coming after `MANY_CHUNKS` pieces that average under `MIN_CHUNK_BYTES` is refused (400, the
connection closed): h11 parses each piece (a chunk, or what one read delivered) on the event loop however
small, so one client streaming a body a byte per chunk slowed every other client's requests from 10 ms
to 1.5-2.3 s. Clients send kilobytes per chunk (a network segment is about 1.4 kB), and a small body is
a piece or two."""


class _StrictHeads(h11.Connection):
    """h11's server side with two refusals of a request from its head, which uvicorn answers (as any
    `h11.RemoteProtocolError`) with a 400 and a closed connection:

    * a head over ``max_incomplete_event_size`` bytes: h11 measures only a head still incomplete, so
      one that arrived in a single write passed at any size the socket delivered at once;
    * a request with both Content-Length and Transfer-Encoding: h11 frames it by Transfer-Encoding,
      a proxy in front may frame it by Content-Length and read what follows as another request
      (RFC 9112 6.1: such a request is refused, or its connection closed after the answer);
    * (and from its body) a body in many tiny pieces (`MANY_CHUNKS`).

    After a refusal every later event is refused too: nothing more is read from the connection."""

    refused: str = ""
    data_events: int = 0
    data_bytes: int = 0

    def next_event(self) -> Any:
        if self.refused:
            raise h11.RemoteProtocolError(self.refused)
        buffered = len(self._receive_buffer)  # h11 keeps no size of a parsed head: its buffer shrinks by it
        event = super().next_event()
        if isinstance(event, h11.Data):
            self.data_events, self.data_bytes = self.data_events + 1, self.data_bytes + len(event.data)
            if self.data_events > MANY_CHUNKS and self.data_bytes < MIN_CHUNK_BYTES * self.data_events:
                self.refused = "request body in too many small chunks"
                raise h11.RemoteProtocolError(self.refused)
        if isinstance(event, h11.Request):
            self.data_events = self.data_bytes = 0
            names = {name for name, _ in event.headers}  # lowercased by h11
            if buffered - len(self._receive_buffer) > self._max_incomplete_event_size:
                self.refused = "request head too large"
            elif b"content-length" in names and b"transfer-encoding" in names:
                self.refused = "both Content-Length and Transfer-Encoding"
            if self.refused:
                raise h11.RemoteProtocolError(self.refused)
        return event


class _Lingering:
    """The protocol's transport, whose ``close`` lingers where the request's body was never read (a
    refusal from the head: 401, 413): the answer is sent, the writing side shut, and what the client
    still sends is read and dropped for up to ``linger_s`` before the socket closes. Closing a socket
    with unread data resets the connection, and the client loses the answer it was sent; lingering
    holds no memory (nothing is kept) and no longer than ``linger_s``."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedH11) -> None:
        self._transport, self._protocol = transport, protocol

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def close(self) -> None:
        p, t = self._protocol, self._transport
        if t.is_closing() or getattr(p, "lingering", False) or p.conn.their_state is not h11.SEND_BODY \
                or not t.can_write_eof():
            t.close()
            return
        p.lingering = True
        t.write_eof()  # after what is buffered: the answer goes out first
        t.resume_reading()
        p.loop.call_later(p.linger_s, t.close)


MAX_LOGGED_TARGET = 256
"""Characters of a request target the access log keeps."""


LOGGED_ONCE_PER_INTERVAL = frozenset({401, 429})
OPEN_PATHS = frozenset({"/v1/health", "/metrics", "/docs", "/openapi.json"})
"""Paths answered without a token: any answer there is logged at most once per status, path and peer
network per interval (hostile round 13, A22: a health flood from one connection, 455 a second, grew the
log by 141 KB/s)."""


class RepeatLimit(logging.Filter):
    """A filter for uvicorn's error log: one message (its template) at most once per ``interval_s``,
    the next one saying how many were left out. Malformed connections need no token, and each logged a
    warning (22,024 in 5 s, hostile round 13)."""

    def __init__(self, interval_s: float = 10.0, max_messages: int = 1024):
        super().__init__()
        self.interval_s, self.max_messages = interval_s, max_messages
        self._seen: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        key, now = str(record.msg)[:200], time.monotonic()
        last, dropped = self._seen.pop(key, (None, 0))
        if last is not None and now - last < self.interval_s:
            self._seen[key] = (last, dropped + 1)
            return False
        self._seen[key] = (now, 0)
        if len(self._seen) > self.max_messages:
            self._seen.popitem(last=False)
        if dropped:
            record.msg = f"{record.msg} (and {dropped} more like it in the last {self.interval_s:g} s)"
        return True
"""Refusals that cost the client nothing to repeat (a guessed token, a request over its rate): the
access log keeps one per status per peer network per interval."""


UNVERIFIED_LINES = 120
"""Access-log lines of unverified answers (`LOGGED_ONCE_PER_INTERVAL` statuses, `OPEN_PATHS`) the whole
server writes per interval, whatever the peers: the rest are counted and summed up in one line when the
interval ends (hostile round 15, A11: floods from rotating 127.x.y.z addresses logged every request,
about 85 KB/s, since each address was a new peer network)."""


class AccessLogLimit(logging.Filter):
    """A filter for uvicorn's access log: targets cut to `MAX_LOGGED_TARGET`; an unverified answer (a
    status of `LOGGED_ONCE_PER_INTERVAL`, a path of `OPEN_PATHS`) logged at most once per peer network per
    ``interval_s`` (the networks remembered are bounded, least recently seen dropped first), and at most
    ``max_unverified`` of them per ``interval_s`` server-wide (`UNVERIFIED_LINES`), the number dropped
    then logged once. Other answers (a verified client's) are all logged."""

    def __init__(self, interval_s: float = 60.0, max_addresses: int = 65536,
                 max_unverified: int = UNVERIFIED_LINES):
        super().__init__()
        self.interval_s, self.max_addresses, self.max_unverified = interval_s, max_addresses, max_unverified
        self._last: OrderedDict[str, float] = OrderedDict()
        self._window, self._logged, self.dropped = time.monotonic(), 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if not (isinstance(args, tuple) and len(args) == 5):
            return True
        addr, method, target, version, status = args
        path = target.split("?", 1)[0] if isinstance(target, str) else ""
        open_path = path if path in OPEN_PATHS else ""
        if status in LOGGED_ONCE_PER_INTERVAL or open_path:
            network = _peer({"client": (str(addr).rsplit(":", 1)[0], 0)})
            if not self._first_in_interval(f"{status} {open_path} {network}") or not self._within_global():
                return False
        if isinstance(target, str) and len(target) > MAX_LOGGED_TARGET:
            record.args = (addr, method, target[:MAX_LOGGED_TARGET] + "...", version, status)
        return True

    def _within_global(self) -> bool:
        """Whether one more unverified line fits this interval's `max_unverified`; a new interval
        first logs how many the last one dropped."""
        now = time.monotonic()
        if now - self._window >= self.interval_s:
            if self.dropped:
                log.warning("access log: %d lines of unverified requests (401, 429, open routes) left out "
                            "in the last %.0f s", self.dropped, now - self._window)
            self._window, self._logged, self.dropped = now, 0, 0
        if self._logged >= self.max_unverified:
            self.dropped += 1
            return False
        self._logged += 1
        return True

    def _first_in_interval(self, key: str) -> bool:
        now = time.monotonic()
        last = self._last.pop(key, None)
        if last is not None and now - last < self.interval_s:
            self._last[key] = last
            return False
        self._last[key] = now
        if len(self._last) > self.max_addresses:
            self._last.popitem(last=False)
        return True


def bind_protocol(head_timeout_s: float, max_connections: int,
                  write_timeout_s: float = GuardedH11.write_timeout_s,
                  linger_s: float = GuardedH11.linger_s) -> type[GuardedH11]:
    """A `GuardedH11` subclass with these limits; ``max_connections`` is lowered to what this
    process's descriptor limit allows (raised to its hard limit first)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    cap = max(16, min(max_connections, soft - FD_RESERVE))
    if cap < max_connections:
        log.warning("connection cap lowered to %d by the descriptor limit (%d)", cap, soft)
    return type("BoundGuardedH11", (GuardedH11,), {"head_timeout_s": head_timeout_s, "max_connections": cap,
                                                   "write_timeout_s": write_timeout_s, "linger_s": linger_s,
                                                   "bare": {}})


def listen(host: str, port: int) -> socket.socket:
    """The bound, listening socket; `OSError` (``EADDRINUSE``) when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run(app: Any, sock: socket.socket, head_timeout_s: float, max_connections: int,
        log_level: str = "info", write_timeout_s: float = GuardedH11.write_timeout_s) -> None:
    """Serve ``app`` on the bound ``sock`` until a signal stops it."""
    config = Config(
        app,
        http=bind_protocol(head_timeout_s, max_connections, write_timeout_s),
        log_level=log_level.lower(),
        timeout_keep_alive=5,
        ws="none",
        lifespan="on",
    )
    logging.getLogger("uvicorn.access").addFilter(AccessLogLimit())  # after Config set up logging
    logging.getLogger("uvicorn.error").addFilter(RepeatLimit())
    Server(config).run(sockets=[sock])
