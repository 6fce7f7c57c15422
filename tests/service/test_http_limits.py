"""The HTTP server's own limits, on loopback: a response nobody reads is dropped after the write
deadline (`http_server.GuardedH11`, served by uvicorn with a small app of its own), and the access log
of a real server stays small under a flood of refused requests with long targets."""

from __future__ import annotations

import logging
import socket
import threading
import time

import httpx
import pytest
from service_server import DIRECTIVE, ServerProcess
from uvicorn.config import Config
from uvicorn.server import Server

from drkernel.service import http_server

CHUNK, CHUNKS = 1 << 20, 64


@pytest.mark.parametrize("pieces", [CHUNKS, 1])
def test_a_response_nobody_reads_is_dropped_at_the_write_deadline(pieces):
    """64 MiB to a client that reads nothing, sent in 64 pieces (the app waits on the socket) or in
    one (the app is done at once and the answer sits in the server's buffer): the server drops the
    connection, and the client, reading at last, finds it closed before the whole answer."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length",
                                                                            str(CHUNK * CHUNKS).encode())]})
        for _ in range(pieces):
            await send({"type": "http.response.body", "body": b"x" * (CHUNK * CHUNKS // pieces), "more_body": True})

    sock = http_server.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = Server(Config(app, http=http_server.bind_protocol(10.0, 100, write_timeout_s=1.0),
                           lifespan="off", log_level="warning", timeout_keep_alive=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        with socket.socket() as c:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.connect(("127.0.0.1", port))
            c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            deadline = time.monotonic() + 60
            while not server.server_state.connections:  # accepted
                assert time.monotonic() < deadline
                time.sleep(0.05)
            while server.server_state.connections:  # and dropped, the answer unread
                assert time.monotonic() < deadline, "the server still holds the unread answer"
                time.sleep(0.05)
            got = 0
            c.settimeout(60)
            try:
                while chunk := c.recv(1 << 20):
                    got += len(chunk)
            except ConnectionResetError:
                pass
        assert got < CHUNK * CHUNKS
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def chatty(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("logs") / "jobs.sqlite", "--devices", "cpu:1", "--evaluator",
                        DIRECTIVE, "--log-level", "info", "--rate-per-peer", "0.001", "--peer-burst", "5")
    srv.start()
    yield srv
    srv.stop()


def test_refused_requests_with_long_targets_cost_one_log_line(chatty):
    """From 127.0.0.5, 60 requests with 8-kB targets: 5 pass, 55 are 429s. The log holds one line for
    those 429s, and no target longer than the cut."""
    pad = "a" * 8192
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.5"), timeout=30) as c:
        codes = [c.get(f"{chatty.url}/metrics?{pad}").status_code for _ in range(60)]
    assert codes.count(429) == 55
    lines = [line for line in chatty.log.read_text().splitlines() if "127.0.0.5:" in line]
    assert sum(" 429" in line for line in lines) == 1, lines[-3:]
    assert max(len(line) for line in lines) < http_server.MAX_LOGGED_TARGET + 200


def test_unknown_tokens_cost_one_log_line(chatty):
    """From 127.0.0.6, 60 requests with made-up tokens: 5 are 401s (the peer's burst), 55 are 429s.
    The log holds one line for each status."""
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.6"), timeout=30) as c:
        codes = [c.get(f"{chatty.url}/v1/queue", headers={"Authorization": f"Bearer guess-{i:04d}"}).status_code
                 for i in range(60)]
    assert (codes.count(401), codes.count(429)) == (5, 55)
    lines = [line for line in chatty.log.read_text().splitlines() if "127.0.0.6:" in line]
    assert (sum(" 401" in line for line in lines), sum(" 429" in line for line in lines)) == (1, 1), lines[-3:]


def test_refusals_are_logged_once_per_status_and_peer_network():
    """The filter on records as uvicorn writes them: 401s from 50 addresses of one /24 (and ports) are
    one line, a 429 from there another, a 401 from the next /24 a third; a 200 is always logged."""
    limit = http_server.AccessLogLimit(interval_s=3600)

    def logged(addr: str, status: int) -> bool:
        record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 0, '%s - "%s %s HTTP/%s" %d',
                                   (addr, "GET", "/v1/queue", "1.1", status), None)
        return limit.filter(record)

    assert [logged(f"203.0.113.{i}:{4000 + i}", 401) for i in range(1, 51)] == [True] + [False] * 49
    assert logged("203.0.113.9:5000", 429) and not logged("203.0.113.10:5000", 429)
    assert logged("203.0.114.1:5000", 401)
    assert logged("2001:db8:0:1::1:5000", 401) and not logged("2001:db8:0:1::ffff:5001", 401)  # one /64
    assert all(logged("203.0.113.1:5000", 200) for _ in range(3))


def test_open_paths_and_repeated_warnings_are_logged_once_per_interval():
    """Hostile round 13 (A22): /v1/health needs no token and every 200 there was an access-log line
    (455 a second from one connection); malformed connections each logged a warning. Now an answer on
    a path without a token is logged once per status, path and peer network per interval, and a
    repeated warning once per interval, the next saying how many were left out."""
    limit = http_server.AccessLogLimit(interval_s=3600)

    def logged(addr: str, target: str, status: int = 200) -> bool:
        record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 0, '%s - "%s %s HTTP/%s" %d',
                                   (addr, "GET", target, "1.1", status), None)
        return limit.filter(record)

    assert [logged("203.0.113.7:4000", "/v1/health") for _ in range(5)] == [True] + [False] * 4
    assert logged("203.0.113.7:4000", "/metrics") and not logged("203.0.113.8:4001", "/metrics?x=1")
    assert logged("203.0.113.7:4000", "/v1/health", 503)  # another status: its own line
    assert logged("198.51.100.1:4000", "/v1/health")      # another network
    assert all(logged("203.0.113.7:4000", "/v1/queue") for _ in range(3))  # a client's route: always

    repeat = http_server.RepeatLimit(interval_s=3600)
    warning = lambda: logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 0,  # noqa: E731
                                        "Invalid HTTP request received.", None, None)
    assert [repeat.filter(warning()) for _ in range(4)] == [True, False, False, False]
    repeat._seen["Invalid HTTP request received."] = (-1e9, 3)  # the interval has passed
    record = warning()
    assert repeat.filter(record) and "and 3 more" in record.getMessage()
    assert repeat.filter(logging.LogRecord("uvicorn.error", logging.ERROR, __file__, 0, "boom", None, None))


def test_a_refused_body_still_gets_its_answer_not_a_reset():
    """An app that answers 413 (Connection: close, as the gate does) without reading a 32 MiB body: the server sends the answer, then drops
    what still arrives (lingers) instead of closing on unread data, which resets the connection and
    loses the answer (seen as `Connection reset by peer` in a client posting an oversized job)."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-length", b"9"), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": b"too large"})

    sock = http_server.listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = Server(Config(app, http=http_server.bind_protocol(10.0, 100, linger_s=60.0),
                           lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        body = 32 << 20
        with socket.socket() as c:
            c.settimeout(60)
            c.connect(("127.0.0.1", port))
            c.sendall(f"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: {body}\r\n\r\n".encode())
            c.sendall(b"x" * body)  # the server answered long before: without lingering, a reset here
            answer = b""
            while chunk := c.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413") and answer.endswith(b"too large")
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def test_a_remote_peer_pays_per_network_not_per_address():
    """Addresses a remote host can vary share one bucket: an IPv4 /24, an IPv6 /64 (IPv4-mapped counts
    as IPv4); loopback addresses stay apart (the tests' clients), different networks too."""
    from drkernel.service.gate import RateLimiter, _peer

    key = lambda host: _peer({"client": (host, 5000)})  # noqa: E731
    assert key("203.0.113.7") == key("203.0.113.200") == key("::ffff:203.0.113.9") == "203.0.113.0/24"
    assert key("203.0.114.7") != key("203.0.113.7")
    assert key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff::9") != key("2001:db8:1:3::1")
    assert key("127.0.0.2") != key("127.0.0.3") and key("::1") == "::1"
    assert _peer({}) == "unknown"
    limiter = RateLimiter(rate=0.001, burst=3)
    passed = [limiter.take(key(f"198.51.100.{i}")) == 0 for i in range(1, 101)]  # 100 addresses, one /24
    assert passed.count(True) == 3


@pytest.fixture(scope="module")
def plain_server():
    """`GuardedH11` in front of an app that answers every request 200 with its method and path."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        body = f"{scope['method']} {scope['path']}".encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    sock = http_server.listen("127.0.0.1", 0)
    server = Server(Config(app, http=http_server.bind_protocol(10.0, 100, linger_s=60.0),
                           lifespan="off", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=10)


def _exchange(port: int, data: bytes) -> bytes:
    """Send ``data`` in one write, then read until the server closes (the client closes no side)."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.settimeout(60)
        c.sendall(data)
        answer = b""
        try:
            while chunk := c.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer


def test_a_request_with_both_content_length_and_transfer_encoding_is_refused_and_closed(plain_server):
    """A POST framed both ways, followed by a GET that a proxy framing by Content-Length would see as
    part of the body (RFC 9112 6.1): one 400, the connection closed, the GET never served."""
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = _exchange(plain_server, b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
                                     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled)
    assert answer.startswith(b"HTTP/1.1 400") and answer.count(b"HTTP/1.1") == 1, answer
    assert b"/smuggled" not in answer
    control = _exchange(plain_server, b"POST /jobs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                                      b"0\r\n\r\n" + smuggled.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    assert control.count(b"HTTP/1.1 200") == 2 and control.endswith(b"GET /smuggled"), control


@pytest.mark.parametrize("padding", [60 * 1024, 200 * 1024])
def test_a_request_head_over_the_cap_is_refused_even_in_one_write(plain_server, padding):
    """A head of 60 KiB or 200 KiB sent in one write (h11 alone refused only heads still incomplete at
    its cap): 400 and closed, the request not served; a head just under the cap is served."""
    def head(size: int) -> bytes:
        start = b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: "
        return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"

    answer = _exchange(plain_server, head(padding))
    assert answer.startswith(b"HTTP/1.1 400") and b"GET /big" not in answer, answer[:200]
    assert _exchange(plain_server, head(http_server.MAX_HEAD_BYTES)).startswith(b"HTTP/1.1 200")
