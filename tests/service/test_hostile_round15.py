"""Hostile round 15, one test per class that broke or degraded: a real server on loopback (one CPU
worker with two slots, the directive evaluator) with small limits, so each defence is reached with
little traffic. Attackers connect from addresses of their own (127.0.0.2 and up: loopback too), so the
victim's requests from 127.0.0.1 are told apart by peer as a remote client's would be."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from service_server import DIRECTIVE, SMALL_REFERENCE, SRC, ServerProcess, http_client as _http, until

from drkernel.service import http_server

MAX_BODY = 3_000_000  # room for a body past the parse limit (1 Mi tokens: 2.4 MB of small numbers)
IN_FLIGHT = 12_000_000  # four clients' worth of two bodies each, as the default (256 MiB, 32-MiB bodies)
MAX_CONNECTIONS = 20
ATTACKERS = ("m1", "m2", "m3", "m4")


def _tokens(db, names) -> dict[str, str]:
    tokens = {}
    for name in names:
        out = subprocess.run([sys.executable, "-m", "drkernel", "gym", "token", "add", name, "--db", str(db)],
                             capture_output=True, text=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
                             timeout=120)
        assert out.returncode == 0, out.stderr
        tokens[name] = out.stdout.strip()
    return tokens


@pytest.fixture(scope="module")
def r15(tmp_path_factory):
    """One server for the body, connection, reader and coalescing tests (reservations on, as by
    default: the coalescing test's canceller must not keep the freed slot either)."""
    db = tmp_path_factory.mktemp("r15") / "jobs.sqlite"
    tokens = _tokens(db, ("alice", "mallory", "mallory2", *ATTACKERS))
    srv = ServerProcess(db, "--devices", "cpu:1", "--slots", "2", "--evaluator", DIRECTIVE,
                        "--max-body-bytes", str(MAX_BODY), "--max-body-bytes-in-flight", str(IN_FLIGHT),
                        "--body-timeout-s", "8", "--max-connections", str(MAX_CONNECTIONS),
                        "--parse-rate-per-client", "100000")
    srv.start()
    yield srv, tokens
    srv.stop()


def _job(solution: str, code: str = SMALL_REFERENCE) -> dict:
    problem = {"name": "double", "level": 1, "code": code, "source": "test"}
    return {"problem": problem, "solution": solution, "config": {"device": "cpu"}}


def _until(predicate, what: str, deadline_s: float = 30.0) -> None:
    until(predicate, what, deadline_s, 0.05)


def _status_line(s: socket.socket) -> bytes:
    """The status line the server answered on ``s`` (b"" when it closed without one)."""
    s.settimeout(60)
    try:
        return s.recv(4096).split(b"\r\n", 1)[0]
    except (ConnectionResetError, BrokenPipeError):
        return b""


def _stalled_body(srv, token: str, source: str) -> socket.socket:
    """A POST declaring a body of ``MAX_BODY`` bytes, all but its last byte sent, then held."""
    s = socket.create_connection(("127.0.0.1", srv.port), source_address=(source, 0))
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {MAX_BODY}\r\n\r\n").encode()
    try:
        s.sendall(head + b"{" + b" " * (MAX_BODY - 2))
    except OSError:  # refused or cut as it arrived: its answer is read later
        pass
    return s


def test_clients_stalling_bodies_cannot_take_the_whole_body_budget(r15):
    """Hostile round 15, A12: four identities, two stalled bodies of 3 MB each (the server holds 12 MB
    of bodies, four clients' worth), made every other client's POST a 503 ``bodies_in_flight`` until
    the body deadline. Now a client holds at most its share of the budget (a newcomer's kept free) and
    a newcomer within its share cuts the body of the client holding most: alice's 5 POSTs are all
    accepted while the eight bodies are held, and each stalled body ends 503 or 408. A lone client's
    body near the limit still passes."""
    srv, tokens = r15
    with _http(srv, tokens["alice"]) as alice:
        big = _job("class ModelNew: pass\n# " + "x" * 200_000)
        assert alice.post("/v1/jobs", json=big).status_code == 202  # alone: a large body passes
        held = [_stalled_body(srv, tokens[name], f"127.0.0.{2 + i}") for i, name in enumerate(ATTACKERS)
                for _ in range(2)]
        try:
            time.sleep(1.0)  # the stalled bytes reach the server
            codes = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# a12 {k}")).status_code
                     for k in range(5)]
            assert codes == [202] * 5, codes
            lines = [_status_line(s) for s in held]
            assert all(line.split(b" ")[1:2] in ([b"503"], [b"408"]) for line in lines), lines
        finally:
            for s in held:
                s.close()


def test_a_flood_of_bare_connections_cuts_no_progressing_upload(r15):
    """Hostile round 15, A13: past the connection cap the connection whose unfinished request began
    first was closed, so bare connections (no byte sent, no token) opened fast cut 3 of 3 slow honest
    uploads. Now the request that made the least progress goes first: with a cap of 20, 300 bare
    connections from one peer while alice uploads 200 kB in 20 pieces over about 3 s; the upload is
    answered 202 and the bare connections are what was closed."""
    srv, tokens = r15
    body = httpx.Request("POST", "http://x/", json=_job("class ModelNew: pass\n# " + "y" * 200_000)).content
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens['alice']}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    bare, stop = [], threading.Event()

    def flood():
        while not stop.is_set() and len(bare) < 300:
            bare.append(socket.create_connection(("127.0.0.1", srv.port), source_address=("127.0.0.9", 0)))
            time.sleep(0.01)

    upload = socket.create_connection(("127.0.0.1", srv.port))
    flooder = threading.Thread(target=flood)
    try:
        upload.sendall(head)
        flooder.start()
        piece = len(body) // 20 + 1
        for k in range(0, len(body), piece):
            upload.sendall(body[k:k + piece])
            time.sleep(0.15)
        assert _status_line(upload).startswith(b"HTTP/1.1 202"), "alice's upload was cut"
        stop.set()
        flooder.join(30)
        closed = sum(_closed(s) for s in bare)
        assert closed >= len(bare) - MAX_CONNECTIONS, (closed, len(bare))
    finally:
        stop.set()
        upload.close()
        for s in bare:
            s.close()


def _closed(s: socket.socket) -> bool:
    s.settimeout(0.5)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_refused_bodies_are_charged_so_they_cannot_hold_the_reading_children(r15):
    """Hostile round 15, A08: two identities looping bodies of numbers past the parse limit (each
    counted in one of the server's two reading children, refused 413 and charged nothing) held both
    children: 7 of 8 of alice's custom problems were 429 ``admission_busy``. Now a refused body is
    charged what its child counted and a client that owes is refused before a child counts its next:
    of 8 such bodies from each identity at most 2 reach a child (413), the rest are 429 for its parse
    rate; then alice's 4 custom problems with references past the inline size are all accepted."""
    srv, tokens = r15
    numbers = b'{"problem_key":"builtin/L1/gelu","solution":"x","metadata":[' + b"0," * 1_200_000 + b"0]}"
    for name in ("mallory", "mallory2"):
        with _http(srv, tokens[name], source="127.0.0.20") as m:
            codes = [m.post("/v1/jobs", content=numbers, headers={"Content-Type": "application/json"}).status_code
                     for _ in range(8)]
        assert codes.count(413) <= 2 and codes.count(413) + codes.count(429) == 8, codes
        assert codes.count(429) >= 6, codes
    reference = SMALL_REFERENCE + "\n# " + "r" * 9000 + "\n"
    with _http(srv, tokens["alice"]) as alice:
        codes = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# a08 {k}", reference)).status_code
                 for k in range(4)]
    assert codes == [202] * 4, codes


def test_cancelling_a_running_copy_does_not_move_anothers_queued_copy_back(r15):
    """Hostile round 15, A03: a queued job whose request equals a running one waits (it will be a
    cache hit). mallory ran a copy of alice's request X, queued another copy and cancelled the running
    one: her fresh copy (she ran nothing else) sorted ahead of alice's (alice had a job running), and
    alice's X waited 11-28x longer. Now the oldest queued copy runs when X is next claimable: alice's
    runs (attempts 1) and mallory's later copy is finished by its result without ever running. (The
    killed run of mallory's cancelled copy is no result: it gives her no reservation back, which kept
    the freed slot from alice's copy until her long job ended.)"""
    srv, tokens = r15
    x = _job("class ModelNew: pass\n# sleep: 1.5\n# the request X")
    # (m1 plays mallory: mallory herself owes parse budget from the reader test)
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["m1"]) as mallory:
        long = alice.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 300\n# a03 long")).json()["id"]
        _until(lambda: alice.get(f"/v1/jobs/{long}").json()["status"] == "running", "alice's long job running")
        first = mallory.post("/v1/jobs", json=x).json()["id"]
        _until(lambda: mallory.get(f"/v1/jobs/{first}").json()["status"] == "running", "mallory's copy running")
        hers = alice.post("/v1/jobs", json=x).json()["id"]
        again = mallory.post("/v1/jobs", json=x).json()["id"]
        assert alice.get(f"/v1/jobs/{hers}").json()["status"] == "queued"
        assert mallory.delete(f"/v1/jobs/{first}").status_code in (200, 202)
        done = alice.get(f"/v1/jobs/{hers}/wait?timeout=60").json()
        theirs = mallory.get(f"/v1/jobs/{again}/wait?timeout=60").json()
        assert done["status"] == "done" and done["attempts"] == 1, done
        assert theirs["status"] == "done" and theirs["attempts"] == 0, theirs
        alice.delete(f"/v1/jobs/{long}")


def test_unverified_floods_from_many_addresses_meet_one_server_bucket_and_log_budget(tmp_path):
    """Hostile round 15, A11: requests with unknown tokens from rotating 127.x.y.z addresses met a new
    peer bucket each (10,243 answers of 401, none 429) and each was an access-log line. Now they also
    take from one bucket of the whole server (``--rate-unverified 2 --unverified-burst 60``) and at
    most `UNVERIFIED_LINES` of their lines are logged per interval: of 300 requests from 300
    addresses most are 429, and the log holds no more than the global budget of their lines. alice's
    verified token is unaffected: 20 of 20 requests answered 200 during the flood."""
    db = tmp_path / "jobs.sqlite"
    tokens = _tokens(db, ("alice",))
    srv = ServerProcess(db, "--devices", "cpu:1", "--evaluator", DIRECTIVE, "--log-level", "info",
                        "--rate-unverified", "2", "--unverified-burst", "60").start()
    try:
        with _http(srv, tokens["alice"]) as alice:
            assert alice.get("/v1/queue").status_code == 200  # its first use: verified from now on
            codes, mine = [], []
            for i in range(300):
                source = f"127.0.{40 + i // 200}.{1 + i % 200}"
                with _http(srv, f"guess-{i}", source=source) as guess:
                    codes.append(guess.get("/v1/queue").status_code)
                if i % 15 == 0:
                    mine.append(alice.get("/v1/queue").status_code)
        assert codes.count(401) + codes.count(429) == 300 and codes.count(429) >= 150, codes.count(401)
        assert mine == [200] * 20, mine
        lines = [line for line in srv.log.read_text().splitlines() if "127.0.4" in line]
        assert 0 < len(lines) <= http_server.UNVERIFIED_LINES, len(lines)
    finally:
        srv.stop()


def test_the_unverified_log_budget_is_server_wide_and_sums_up_what_it_dropped(caplog):
    """The access-log filter alone: refusals from 5 networks with a budget of 3 lines: 3 logged, 2
    dropped; the next interval's first line is preceded by one line counting the 2; a verified
    client's answers are always logged."""
    limit = http_server.AccessLogLimit(interval_s=3600, max_unverified=3)

    def logged(addr: str, status: int) -> bool:
        record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 0, '%s - "%s %s HTTP/%s" %d',
                                   (addr, "GET", "/v1/queue", "1.1", status), None)
        return limit.filter(record)

    assert [logged(f"198.51.{i}.1:4000", 401) for i in range(5)] == [True] * 3 + [False] * 2
    assert all(logged("198.51.9.1:4000", 202) for _ in range(3))
    limit._window -= 3600  # the interval has passed
    with caplog.at_level(logging.WARNING, logger=http_server.__name__):
        assert logged("198.51.50.1:4000", 401)
    assert any("2 lines of unverified requests" in r.getMessage() for r in caplog.records), caplog.records


def test_cached_resubmissions_do_not_renew_a_reservation(tmp_path):
    """Hostile round 15, A01: mallory ran one job, then re-submitted it every 15 s: each a cache hit
    (no job runs) that renewed her reservation, so one of two slots stayed idle for alice's batch. Now
    only work that runs renews it: with ``--reserve-s 3`` and mallory's cached copy re-sent every
    0.3 s, alice's two jobs sent 4 s after mallory's last real one run side by side."""
    db = tmp_path / "jobs.sqlite"
    tokens = _tokens(db, ("alice", "mallory"))
    srv = ServerProcess(db, "--devices", "cpu:1", "--slots", "2", "--evaluator", DIRECTIVE,
                        "--reserve-s", "3").start()
    stop = threading.Event()
    try:
        with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["mallory"]) as mallory:
            ping = _job("class ModelNew: pass\n# mallory's one job")
            first = mallory.post("/v1/jobs", json=ping).json()["id"]
            assert mallory.get(f"/v1/jobs/{first}/wait?timeout=60").json()["status"] == "done"
            cached = []

            def keep_pinging():
                while not stop.is_set():
                    cached.append(mallory.post("/v1/jobs", json=ping).json()["cached"])
                    time.sleep(0.3)

            pinger = threading.Thread(target=keep_pinging)
            pinger.start()
            time.sleep(4.0)  # past reserve_s since mallory's last job that ran
            ids = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 3\n# a01 {k}")).json()["id"]
                   for k in range(2)]
            done = [alice.get(f"/v1/jobs/{j}/wait?timeout=60").json() for j in ids]
            stop.set()
            pinger.join(30)
        assert cached and all(cached), cached
        assert all(j["status"] == "done" for j in done), done
        assert done[1]["started_at"] < done[0]["finished_at"], done  # side by side, not one after the other
    finally:
        stop.set()
        srv.stop()
