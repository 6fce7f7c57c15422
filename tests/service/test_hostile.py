"""The service under hostile clients: one test per class of attack, against a real server on
loopback (one CPU worker with one slot, the directive evaluator, small limits so each defence is
reached with little traffic). Clients alice, bob, carol and dave have tokens of their own."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sqlite3
import stat
import subprocess
import sys
import time

import httpx
import pytest
from service_server import DIRECTIVE, SMALL_REFERENCE, SRC, ServerProcess

from drkernel.errors import ServiceError
from drkernel.service.app import METHODS
from drkernel.service.client import ServiceClient

LIMITS = ("--max-connections", "40", "--head-timeout-s", "2", "--body-timeout-s", "2",
          "--max-waits-per-client", "2", "--max-stored-bytes-per-client", "300000",
          "--max-body-bytes", "200000")


def _drkernel(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "drkernel", "gym", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin", **(env or {})}, timeout=120)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    db = tmp_path_factory.mktemp("hostile") / "jobs.sqlite"
    tokens = {}
    for name in ("alice", "bob", "carol", "dave"):
        out = _drkernel("token", "add", name, "--db", str(db))
        assert out.returncode == 0, out.stderr
        tokens[name] = out.stdout.strip()
    srv = ServerProcess(db, "--devices", "cpu:1", "--slots", "1", "--evaluator", DIRECTIVE, *LIMITS)
    srv.start()
    yield srv, tokens
    srv.stop()


def _http(srv, token) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


def _custom(solution: str, dtype: str = "float32", code: str = SMALL_REFERENCE, name: str = "double",
            **extra) -> dict:
    problem = {"name": name, "level": 1, "code": code, "source": "test", "dtype": dtype}
    return {"problem": problem, "solution": solution, "config": {"device": "cpu"}, **extra}


def _done(client: httpx.Client, job_id: str) -> dict:
    out = client.get(f"/v1/jobs/{job_id}/wait?timeout=60").json()
    assert out["status"] in ("done", "failed", "cancelled"), out
    return out


def _metric(srv, name: str, **labels) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in httpx.get(f"{srv.url}/metrics").text.splitlines():
        if line.startswith(name + ("{" + want + "}" if want else " ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _closed_by_server(s: socket.socket) -> bool:
    """The server closed ``s`` without answering: EOF, or a reset (it closed with our unread head)."""
    s.settimeout(60)
    try:
        return s.recv(1024) == b""
    except ConnectionResetError:
        return True


def test_metric_labels_are_a_fixed_set_whatever_method_a_client_sends(hostile):
    srv, _ = hostile
    for _ in range(50):
        httpx.request("X" + secrets.token_hex(40).upper(), f"{srv.url}/v1/jobs")
    methods = set(re.findall(r'method="([^"]*)"', httpx.get(f"{srv.url}/metrics").text))
    assert methods and methods <= METHODS | {"other"}, methods


def test_connections_that_never_send_a_head_do_not_lock_others_out(hostile):
    """40 connections at most: 60 half-sent heads evict the oldest of themselves; a client that sends
    its head at once is served; every silent one is closed by the head deadline."""
    srv, tokens = hostile
    idle = []
    for _ in range(60):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(b"GET /v1/queue HTTP/1.1\r\nHost: x\r\n")  # never finished
        idle.append(s)
    try:
        with _http(srv, tokens["alice"]) as alice:
            assert alice.get("/v1/queue").status_code == 200
        for s in idle:  # closed by eviction or by the 2-s head deadline, with no response
            assert _closed_by_server(s)
    finally:
        for s in idle:
            s.close()


def test_a_body_that_never_arrives_is_answered_408(hostile):
    srv, tokens = hostile
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens['alice']}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"sol".encode())
        s.settimeout(60)
        assert s.recv(4096).split(b"\r\n", 1)[0].endswith(b"408 Request Timeout")


def test_bodies_held_open_are_bounded_per_client(hostile):
    """alice announces three bodies just under the 200 kB limit and sends 150 kB of each, then holds
    them: two fit her budget of two bodies and end in 408 at the body deadline; the third is refused
    with 503 as it arrives, before it is held. bob's own request meanwhile is served."""
    srv, tokens = hostile
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens['alice']}\r\n"
            "Content-Type: application/json\r\nContent-Length: 190000\r\n\r\n").encode()
    conns = [socket.create_connection(("127.0.0.1", srv.port)) for _ in range(3)]
    try:
        for c in conns:
            c.sendall(head + b"{" + b" " * 150_000)
        with _http(srv, tokens["bob"]) as bob:
            assert bob.post("/v1/jobs", json=_custom("class ModelNew: pass\n# bodies")).status_code in (200, 202, 403)
        lines = []
        for c in conns:
            c.settimeout(60)
            lines.append(c.recv(4096).split(b"\r\n", 1)[0])
        assert sorted(line.split(b" ")[1] for line in lines) == [b"408", b"408", b"503"], lines
    finally:
        for c in conns:
            c.close()


def test_a_body_on_a_route_that_takes_none_is_refused_at_once(hostile):
    """A slow body on the open /v1/health holds no connection: the head announcing it is answered."""
    srv, _ = hostile
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        s.settimeout(30)
        assert s.recv(4096).split(b"\r\n", 1)[0].endswith(b"413 Request Entity Too Large")


def _status_then_closed(s: socket.socket) -> bytes:
    """The status line the server answered on ``s`` (b"" for none) once it closed the connection
    (`TimeoutError` when it keeps it open)."""
    s.settimeout(60)
    data = b""
    try:
        while chunk := s.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data.split(b"\r\n", 1)[0]


@pytest.mark.parametrize("path", ["/zz", "/", "/v1", "/metrics/", "/docs/x", "/V1/jobs", "/v1/jobs"])
def test_a_request_without_a_token_is_refused_from_its_head_on_any_path(hostile, path):
    """No path outside the open ones waits for a body without a token: the head is answered 401 and
    the connection closed, with 1 byte of a 100-kB body sent (none of it is read or held)."""
    srv, _ = hostile
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{{".encode())
        status = _status_then_closed(s)
    assert status.startswith(b"HTTP/1.1 401"), status


def test_an_unknown_route_takes_no_body_from_a_client(hostile):
    """An authenticated client's body on a path no route reads is refused from the head (413)."""
    srv, tokens = hostile
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(f"POST /zz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens['dave']}\r\n"
                  "Content-Length: 100000\r\n\r\n{".encode())
        status = _status_then_closed(s)
    assert status.startswith(b"HTTP/1.1 413"), status


def test_half_sent_bodies_do_not_lock_others_out(hostile):
    """40 connections at most: 60 requests whose head is in and whose body never finishes evict the
    oldest of themselves; a client that sends its request at once is served; every one is closed."""
    srv, tokens = hostile
    held = []
    for _ in range(60):
        s = socket.create_connection(("127.0.0.1", srv.port))
        s.sendall(f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens['dave']}\r\n"
                  "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{".encode())
        held.append(s)
    try:
        with _http(srv, tokens["alice"]) as alice:
            assert alice.get("/v1/queue").status_code == 200
        for s in held:  # evicted, or answered 408 by the 2-s body deadline, and closed
            assert _status_then_closed(s) in (b"", b"HTTP/1.1 408 Request Timeout")
    finally:
        for s in held:
            s.close()


def test_a_list_of_wrong_items_costs_one_validation_error(hostile):
    srv, tokens = hostile
    with _http(srv, tokens["alice"]) as c:
        body = json.dumps({"ids": [1] * 65_537}, separators=(",", ":"))  # over the longest list a body holds
        r = c.post("/v1/jobs/wait", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and len(r.json()["detail"]) == 1, r.text[:300]
        r = c.post("/v1/jobs/wait", json={"ids": [1] * 500})  # under the length limit: one error, fail fast
        assert r.status_code == 422 and len(r.json()["detail"]) == 1


def test_deeply_nested_metadata_is_a_422_not_a_crash(hostile):
    """Past the parser's 200 levels: a 422 that says where it stopped (the body is not parsed a second
    time to name the field: that second parse ran on the event loop, hostile round 10)."""
    srv, tokens = hostile
    nested: object = 1
    for _ in range(200):
        nested = {"k": nested}
    with _http(srv, tokens["alice"]) as c:
        r = c.post("/v1/jobs", json=_custom("x = 1", metadata=nested))
        assert r.status_code == 422 and "recursion limit exceeded" in json.dumps(r.json()["detail"]), r.text[:300]


def test_long_polls_on_ids_of_others_hold_nothing(hostile):
    """A wait on 50 ids the client does not own returns at once (no waiter is made), whatever its timeout."""
    srv, tokens = hostile
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        mine = alice.post("/v1/jobs", json=_custom("class ModelNew: pass\n# polled")).json()["id"]
        ids = [mine] + [secrets.token_hex(16) for _ in range(49)]
        out = bob.post("/v1/jobs/wait", json={"ids": ids, "timeout": 3600}).json()
        assert out["jobs"] == [] and out["missing"] == ids


def test_a_flood_of_high_priority_jobs_does_not_starve_another_client(hostile):
    """alice queues 8 jobs at priority 100, then bob one at -100: bob's starts before all but the
    jobs of alice already running or claimed when it arrived (one slot)."""
    srv, tokens = hostile
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        flood = [alice.post("/v1/jobs", json=_custom(f"class ModelNew: pass\n# sleep: 0.3\n# {i}",
                                                     priority=100)).json()["id"] for i in range(8)]
        mine = bob.post("/v1/jobs", json=_custom("class ModelNew: pass\n# bob", priority=-100)).json()["id"]
        started = _done(bob, mine)["started_at"]
        before = [j for j in flood if (_done(alice, j)["started_at"] or 0) < started]
        assert len(before) <= 2, before


def test_a_client_cannot_store_more_than_its_bytes(hostile):
    srv, tokens = hostile
    pad = "#" * 60_000
    with _http(srv, tokens["carol"]) as carol:
        codes = [carol.post("/v1/jobs", json=_custom(f"class ModelNew: pass\n{pad}{i}")) for i in range(6)]
    assert [r.status_code for r in codes[:4]] == [202] * 4
    assert codes[-1].status_code == 429 and "max_stored_bytes_per_client" in codes[-1].json()["detail"]


def test_the_problem_dtype_is_in_the_cache_key(hostile):
    srv, tokens = hostile
    solution = "class ModelNew: pass\n# dtype"
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        first = alice.post("/v1/jobs", json=_custom(solution, "float16", name="halfd")).json()["id"]
        _done(alice, first)
        other = bob.post("/v1/jobs", json=_custom(solution, "float32", name="halfd")).json()
        same = bob.post("/v1/jobs", json=_custom(solution, "float16", name="halfd")).json()
    assert other["cached"] is False and same["cached"] is True


def test_size_constants_cannot_make_admission_compute_huge_integers(hostile):
    srv, tokens = hostile
    squares = "\n".join(["B = 3"] + ["B = B * B"] * 40)
    code = f"import torch\nN = 2**62\n{squares}\n" + SMALL_REFERENCE.replace(
        "torch.randn(64)", "torch.randn(N), torch.randn(B, B)")
    with _http(srv, tokens["alice"]) as alice:
        r = alice.post("/v1/jobs", json=_custom("class ModelNew: pass\n# big", code=code, name="bigref"))
        assert r.status_code == 202, r.text
        assert _done(alice, r.json()["id"])["status"] == "done"


DEEP = "_deep = " + "+".join(["1"] * 6000) + "\n"


def test_a_reference_too_deep_to_read_is_a_422_naming_its_code(hostile):
    srv, tokens = hostile
    with _http(srv, tokens["alice"]) as alice:
        r = alice.post("/v1/jobs", json=_custom("class ModelNew: pass\n", code=DEEP + SMALL_REFERENCE, name="deep"))
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_problem" and "nests too deeply" in r.text


def test_a_refused_batch_reads_no_reference(hostile):
    """Quota and idempotency come before any problem code is read: a batch reusing a key for another
    request is a 409 even where its reference is too deep to read (read first, it would be a 422)."""
    srv, tokens = hostile
    with _http(srv, tokens["carol"]) as carol:
        first = carol.post("/v1/jobs", json=_custom("class ModelNew: pass\n# k", idempotency_key="k1"))
        assert first.status_code == 202, first.text
        _done(carol, first.json()["id"])
        deep = _custom("class ModelNew: pass\n# other", code=DEEP + SMALL_REFERENCE, name="deep",
                       idempotency_key="k1")
        r = carol.post("/v1/jobs/batch", json={"requests": [deep]})
    assert r.status_code == 409, r.text


def test_a_crash_is_not_cached_as_the_solutions_verdict(hostile):
    """A crash (what a kill from outside also reads as) serves no one else: the same request runs
    again. A correct result is cached (the control)."""
    srv, tokens = hostile
    with _http(srv, tokens["alice"]) as alice:
        for solution, cached in (("class ModelNew: pass\n# status: crashed\n# not cached", False),
                                 ("class ModelNew: pass\n# cached", True)):
            first = alice.post("/v1/jobs", json=_custom(solution)).json()
            assert _done(alice, first["id"])["status"] == "done"
            again = alice.post("/v1/jobs", json=_custom(solution)).json()
            assert again["cached"] is cached, (solution, again)
            assert _done(alice, again["id"])["attempts"] == int(not cached)


def test_a_client_streaming_crashes_costs_one_canary(hostile):
    """Dave's first crash canaries the worker, his next four do not; bob's first crash still does.
    (A job after the crashes is run only once any canary they started has passed and been counted.)"""
    srv, tokens = hostile
    before = _metric(srv, "kernelgym_canary_total", outcome="passed")
    for who, n in (("dave", 5), ("bob", 1)):
        with _http(srv, tokens[who]) as c:
            for i in range(n):
                job = c.post("/v1/jobs", json=_custom(f"class ModelNew: pass\n# status: crashed\n# {who}{i}"))
                assert _done(c, job.json()["id"])["result"]["status"] == "crashed"
            _done(c, c.post("/v1/jobs", json=_custom(f"class ModelNew: pass\n# after {who}")).json()["id"])
    assert _metric(srv, "kernelgym_canary_total", outcome="passed") == before + 2


def test_a_failing_reference_fails_its_job_once_without_a_canary(hostile):
    srv, tokens = hostile
    canaries = _metric(srv, "kernelgym_canary_total", outcome="passed")
    with _http(srv, tokens["alice"]) as alice:
        job = alice.post("/v1/jobs", json=_custom("class ModelNew: pass\n# reference_error")).json()["id"]
        out = _done(alice, job)
    assert (out["status"], out["error_class"], out["attempts"]) == ("failed", "reference_error", 1)
    assert "reference" in out["error"]
    assert _metric(srv, "kernelgym_canary_total", outcome="passed") == canaries


def test_a_job_cancelled_again_is_counted_finished_once(hostile):
    """Alice cancels her queued job three times and a done job once: every answer is the job as it
    stands, and only the cancel that ended it counts in ``kernelgym_jobs_finished_total``."""
    srv, tokens = hostile
    with _http(srv, tokens["alice"]) as alice:
        before = _metric(srv, "kernelgym_jobs_finished_total", outcome="cancelled")
        done = _done(alice, alice.post("/v1/jobs", json=_custom("class ModelNew: pass\n# cancel-done")).json()["id"])
        job = alice.post("/v1/jobs", json=_custom(f"class ModelNew: pass\n# sleep: 300\n# {secrets.token_hex(4)}"))
        answers = [alice.delete(f"/v1/jobs/{job.json()['id']}").json()["status"] for _ in range(3)]
        late = alice.delete(f"/v1/jobs/{done['id']}").json()["status"]
        assert answers == ["cancelled"] * 3 and late == "done"
        assert _metric(srv, "kernelgym_jobs_finished_total", outcome="cancelled") == before + 1


def test_a_client_registered_under_a_removed_name_sees_none_of_its_jobs(hostile):
    srv, tokens = hostile
    with _http(srv, tokens["dave"]) as dave:
        old = dave.post("/v1/jobs", json=_custom("class ModelNew: pass\n# dave", idempotency_key="k1")).json()
    assert _drkernel("token", "remove", "dave", "--db", str(srv.db)).returncode == 0
    new_token = _drkernel("token", "add", "dave", "--db", str(srv.db)).stdout.strip()
    with _http(srv, new_token) as dave:
        assert dave.get(f"/v1/jobs/{old['id']}").status_code == 404
        again = dave.post("/v1/jobs", json=_custom("class ModelNew: pass\n# dave", idempotency_key="k1")).json()
    assert again["id"] != old["id"] and again["created"] is True


def test_removing_a_client_cancels_its_queued_and_running_jobs(hostile):
    """frank's 300-s job runs in the worker's one slot and another waits behind it; once frank is
    removed, both are cancelled and the slot is free: alice's job is done within a minute."""
    srv, _ = hostile
    token = _drkernel("token", "add", "frank", "--db", str(srv.db)).stdout.strip()
    with _http(srv, token) as frank:
        ids = [frank.post("/v1/jobs", json=_custom(f"class ModelNew: pass\n# sleep: 300\n# f{i}")).json()["id"]
               for i in range(2)]
        deadline = time.monotonic() + 60
        while frank.get(f"/v1/jobs/{ids[0]}").json()["status"] != "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert _drkernel("token", "remove", "frank", "--db", str(srv.db)).returncode == 0
    with sqlite3.connect(f"file:{srv.db}?mode=ro", uri=True) as db:
        states = [db.execute("SELECT status FROM jobs WHERE id = ?", (i,)).fetchone()[0] for i in ids]
    assert states == ["cancelled", "cancelled"]
    with _http(srv, hostile[1]["alice"]) as alice:
        job = alice.post("/v1/jobs", json=_custom("class ModelNew: pass\n# after frank")).json()["id"]
        assert _done(alice, job)["status"] == "done"


def test_the_job_store_is_readable_by_its_owner_only(hostile):
    srv, _ = hostile
    for path in (srv.db, srv.db.with_name(srv.db.name + "-wal")):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


def test_docs_load_nothing_from_elsewhere(hostile):
    srv, _ = hostile
    page = httpx.get(f"{srv.url}/docs")
    assert page.status_code == 200 and "<script" not in page.text and "http" not in page.text.replace(
        "http://HOST:PORT", "")
    assert "/openapi.json" in page.text and "Authorization: Bearer" in page.text
    assert "/v1/jobs" in httpx.get(f"{srv.url}/openapi.json").json()["paths"]


def test_an_unknown_token_is_a_401_that_says_where_tokens_come_from(hostile):
    srv, _ = hostile
    with ServiceClient(srv.url, "not-a-token", retries=0) as c, pytest.raises(ServiceError) as e:
        c.queue()
    assert "401" in str(e.value) and "token add" in str(e.value)


def test_a_client_holds_at_most_its_long_polls(hostile):
    """Two long polls held (the gauge says so), the third is a 429; cancelling ends the two."""
    import threading

    srv, tokens = hostile
    with _http(srv, tokens["bob"]) as bob:
        job = bob.post("/v1/jobs", json=_custom("class ModelNew: pass\n# sleep: 20\n# held")).json()["id"]
        answers: list[int] = []
        polls = [threading.Thread(target=lambda: answers.append(
            bob.get(f"/v1/jobs/{job}/wait?timeout=120").status_code)) for _ in range(2)]
        for t in polls:
            t.start()
        deadline = time.monotonic() + 60
        while _metric(srv, "kernelgym_long_polls") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        third = bob.get(f"/v1/jobs/{job}/wait?timeout=120")
        bob.delete(f"/v1/jobs/{job}")
        for t in polls:
            t.join(60)
    assert third.status_code == 429 and third.json()["error"] == "quota_exceeded"
    assert answers == [200, 200]


# -- a single-user server on the default store -----------------------------------------------------


@pytest.fixture(scope="module")
def single_user(tmp_path_factory):
    """A server with no token in a state folder of its own (XDG_STATE_HOME): it writes its token
    beside the default store, where a symbolic link to another file was planted first."""
    state = tmp_path_factory.mktemp("state")
    folder = state / "drkernel"
    folder.mkdir()
    victim = state / "victim"
    victim.write_text("not yours\n")
    (folder / "kernelgym.sqlite.token").symlink_to(victim)
    srv = ServerProcess(folder / "kernelgym.sqlite", "--devices", "cpu:1", "--evaluator", DIRECTIVE,
                        "--retention-s", "1", "--lease-s", "3", "--max-stored-bytes-per-client", "200000",
                        single_user=True,
                        env={"XDG_STATE_HOME": str(state)})
    srv.start()
    yield srv, state, victim
    srv.stop()


def test_the_token_file_replaces_a_planted_link_and_is_found_by_submit(single_user, tmp_path):
    srv, state, victim = single_user
    token_file = state / "drkernel" / "kernelgym.sqlite.token"
    assert victim.read_text() == "not yours\n"
    assert not token_file.is_symlink() and stat.S_IMODE(token_file.stat().st_mode) == 0o600
    solution = tmp_path / "sol.py"
    solution.write_text("class ModelNew: pass\n")
    out = _drkernel("submit", "builtin/L1/gelu", str(solution), "--url", srv.url,
                    env={"XDG_STATE_HOME": str(state), "HOME": str(tmp_path)})
    assert out.returncode in (0, 1), out.stderr
    assert json.loads(out.stdout.splitlines()[-1])["status"] == "done"


def test_finished_jobs_are_removed_after_the_retention_time(single_user):
    srv, state, _ = single_user
    token = (state / "drkernel" / "kernelgym.sqlite.token").read_text().strip()
    with _http(srv, token) as c:
        job = c.post("/v1/jobs", json=_custom("class ModelNew: pass\n# retained")).json()["id"]
        _done(c, job)
        deadline = time.monotonic() + 60
        while c.get(f"/v1/jobs/{job}").status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert c.get(f"/v1/jobs/{job}").status_code == 404


def test_a_client_over_its_stored_bytes_is_refused_until_retention_removes_its_jobs(single_user):
    # 60 kB requests under a 200 kB quota: the fourth is a classified 429; once the first three have
    # finished and the retention time (1 s) removed them, the same request is stored.
    srv, state, _ = single_user
    token = (state / "drkernel" / "kernelgym.sqlite.token").read_text().strip()
    body = [_custom(f"class ModelNew: pass\n{'#' * 60_000}\n# {i}") for i in range(4)]
    with _http(srv, token) as c:
        ids = [c.post("/v1/jobs", json=b).json()["id"] for b in body[:3]]
        refused = c.post("/v1/jobs", json=body[3])
        assert refused.status_code == 429 and refused.json()["error"] == "quota_exceeded"
        assert "max_stored_bytes_per_client=200000" in refused.json()["detail"]
        for job in ids:
            _done(c, job)
        deadline = time.monotonic() + 60
        while any(c.get(f"/v1/jobs/{j}").status_code == 200 for j in ids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert c.post("/v1/jobs", json=body[3]).status_code == 202


def test_a_busy_port_fails_before_any_worker_starts(tmp_path):
    marker = tmp_path / "started"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = _drkernel("serve", "--port", str(port), "--db", str(tmp_path / "j.sqlite"), "--devices", "cpu:1",
                        "--evaluator", DIRECTIVE, "--evaluator-kwargs", json.dumps({"started_marker": str(marker)}),
                        "--token", "a-token-for-the-test",
                        env={"PYTHONPATH": os.pathsep.join([str(SRC), str(SRC.parent / "tests" / "service")])})
    assert out.returncode == 2 and "cannot listen" in out.stderr, out.stderr
    assert not marker.exists()


def test_a_custom_reference_is_marked_for_a_judge_of_its_own():
    # The gym runs a reference marked as the request's in a judge of the evaluation's own
    # (tests/gym/test_isolation.py); the mark is the server's: a client cannot clear it.
    from drkernel.gym.orchestrator.own_judge import REQUEST_REFERENCE, is_request_reference
    from drkernel.problems.problem import Problem
    from drkernel.service.config import ServiceConfig
    from drkernel.service.intake import ProblemCatalog, to_request
    from drkernel.service.schemas import request_models

    loaded = Problem(name="loaded", level=1, code=SMALL_REFERENCE, source="test")
    models = request_models(ServiceConfig())
    catalog = ProblemCatalog([loaded])
    for meta in ({}, {REQUEST_REFERENCE: False}):
        body = models.request.model_validate({**_custom("class ModelNew: pass"), "problem": {
            "name": "double", "level": 1, "code": SMALL_REFERENCE, "source": "test", "metadata": meta}})
        assert is_request_reference(to_request(body, catalog, True, ["cpu"]).problem)
    body = models.request.model_validate({"problem_key": loaded.key, "solution": "class ModelNew: pass"})
    assert not is_request_reference(to_request(body, catalog, True, ["cpu"]).problem)


def test_a_cancel_waits_for_the_store_off_the_event_loop(tmp_path):
    """A cancel while another thread holds the store's write lock (as a batch submit's transaction
    does): meanwhile the event loop serves others (the job's state is read, still queued) and the
    cancel is pending. The holder lets go only when the loop tells it to, so a cancel that waited
    for the lock on the loop would never see it freed. Once the lock is free the job is cancelled,
    and by the time the cancel returns, the long poll on the job has been woken."""
    import asyncio
    import threading

    from drkernel.service.config import ServiceConfig
    from drkernel.service.scheduler import Scheduler
    from drkernel.service.store import JobStatus, JobStore, NewJob

    store = JobStore(tmp_path / "jobs.sqlite")
    ((job, _),) = store.submit([NewJob(request_json="{}", req_hash="h", est_bytes=0, client="alice")])
    sched = Scheduler(store, [], ServiceConfig(db_path=str(tmp_path / "jobs.sqlite")))
    held, release, freed_by_loop = threading.Event(), threading.Event(), []

    def hold() -> None:
        with store._lock:  # the store's write lock, as a batch submit's transaction holds it
            held.set()
            freed_by_loop.append(release.wait(60))

    async def main() -> tuple[dict, JobStatus, bool]:
        waiter = asyncio.create_task(sched.wait([job.id], 60, "alice"))
        deadline = time.monotonic() + 60
        while job.id not in sched._waiters:  # the long poll registered
            assert time.monotonic() < deadline and not waiter.done()
            await asyncio.sleep(0)
        polls = set(sched._waiters[job.id])
        holder = threading.Thread(target=hold)
        holder.start()
        await asyncio.to_thread(held.wait)
        cancel = asyncio.create_task(sched.cancel(job.id, "alice"))
        seen = await asyncio.to_thread(store.states, [job.id], "alice")  # the loop goes on meanwhile
        pending = not cancel.done()
        release.set()
        cancelled = await cancel
        woken = all(f.done() for f in polls)
        await waiter
        await asyncio.to_thread(holder.join)
        return seen, cancelled.status, pending and woken

    seen, status, pending_then_woken = asyncio.run(main())
    assert freed_by_loop == [True] and seen == {job.id: JobStatus.QUEUED}
    assert status is JobStatus.CANCELLED and pending_then_woken
    assert store.get(job.id).status is JobStatus.CANCELLED
    store.close()


def test_a_body_sent_a_byte_per_chunk_is_refused_and_closed(hostile):
    """Every chunk costs the event loop a parse and a message: a body still arriving a byte per chunk
    after a few hundred chunks is answered 400 and its connection closed (one such client slowed every
    other client's requests from 10 ms to 1.5-2.3 s); the same body in one chunk is served."""
    srv, tokens = hostile
    head = (f"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tokens['dave']}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(head + b"1\r\n \r\n" * 400)
        assert _status_then_closed(s).endswith(b"400 Bad Request")
    body = json.dumps(_custom("class ModelNew: pass\n# one chunk")).encode()
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.sendall(head.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
                  + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        assert not _status_then_closed(s).endswith((b"400 Bad Request", b"413 Request Entity Too Large"))
