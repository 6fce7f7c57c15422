"""The HTTP server's own limits, on loopback: a response nobody reads is dropped after the write
deadline (`http_server.GuardedH11`, served by uvicorn with a small app of its own), and the access log
of a real server stays small under a flood of refused requests with long targets."""

from __future__ import annotations

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
        codes = [c.get(f"{chatty.url}/v1/health?{pad}").status_code for _ in range(60)]
    assert codes.count(429) == 55
    lines = [line for line in chatty.log.read_text().splitlines() if "127.0.0.5:" in line]
    assert sum(" 429" in line for line in lines) == 1, lines[-3:]
    assert max(len(line) for line in lines) < http_server.MAX_LOGGED_TARGET + 200


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
