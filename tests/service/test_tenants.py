"""Issue 13, defects 3-5: clients with their own tokens own their jobs, quotas and rates bound each
of them, the result cache shares evaluations but no client's metadata, one server per store, and
the operational endpoints (413 chunked, /metrics, health). One real server with clients alice, bob
and carol registered by `drkernel gym token add` before it starts."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import httpx
import pytest
from service_server import DIRECTIVE, SRC, ServerProcess

from drkernel.gym.config import EvalRequest
from drkernel.problems.problem import Problem
from drkernel.service.client import ServiceClient


def _drkernel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "drkernel", "gym", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=120)


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    db = tmp_path_factory.mktemp("tenants") / "jobs.sqlite"
    tokens = {}
    for name in ("alice", "bob", "carol"):
        out = _drkernel("token", "add", name, "--db", str(db))
        assert out.returncode == 0, out.stderr
        tokens[name] = out.stdout.strip()
    srv = ServerProcess(db, "--devices", "cpu:1", "--evaluator", DIRECTIVE, "--max-queued-per-client", "3",
                        "--rate-per-client", "2", "--rate-burst", "40", "--max-body-bytes", "200000")
    srv.start()
    yield srv, tokens
    srv.stop()


def _http(srv, token):
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _body(problem: Problem, solution: str, request_id: str = "", **extra) -> dict:
    return {**EvalRequest(problem, solution, request_id=request_id).to_dict(), "problem_key": problem.key, **extra}


def test_tokens_are_stored_hashed_and_shown_once(tenants):
    srv, tokens = tenants
    with sqlite3.connect(srv.db) as db:
        stored = " ".join(str(v) for row in db.execute("SELECT * FROM clients") for v in row)
    assert {"alice", "bob", "carol"} <= set(stored.split())
    assert not any(t in stored for t in tokens.values())
    out = _drkernel("token", "add", "alice", "--db", str(srv.db))
    assert out.returncode == 2 and "exists" in out.stderr
    assert _drkernel("token", "list", "--db", str(srv.db)).stdout.split() == ["alice", "bob", "carol", "default"]


def test_unauthenticated_garbage_is_a_401_before_the_body_is_read(tenants):
    srv, _ = tenants
    r = httpx.post(f"{srv.url}/v1/jobs", content=b"\x00garbage{{{", headers={"content-type": "application/json"})
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = httpx.post(f"{srv.url}/v1/jobs", content=b"x" * 10_000_000, headers={"Authorization": "Bearer nope-nope"})
    assert r.status_code == 401


def test_jobs_are_owned_by_their_client(tenants, small_problem):
    srv, tokens = tenants
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        job = alice.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# own", "a-1")).json()["id"]
        for r in (bob.get(f"/v1/jobs/{job}"), bob.get(f"/v1/jobs/{job}/wait?timeout=0"), bob.delete(f"/v1/jobs/{job}")):
            assert r.status_code == 404, r.text
        assert bob.post("/v1/jobs/wait", json={"ids": [job], "timeout": 0}).json()["missing"] == [job]
        assert alice.get(f"/v1/jobs/{job}/wait?timeout=20").json()["status"] == "done"


def test_cache_shares_evaluations_not_metadata(tenants, small_problem):
    """Resubmitting alice's solution as bob returns a cached result carrying bob's request_id and
    bob's problem name; a duplicate coalesced while alice's runs likewise."""
    srv, tokens = tenants
    renamed = Problem(name="silu", level=1, code=small_problem.code, problem_id="x", source="test")
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        sol = "class ModelNew: pass\n# sleep: 0.5\n# shared"
        a = alice.post("/v1/jobs", json=_body(small_problem, sol, "alice-secret", idempotency_key="k1")).json()
        b = bob.post("/v1/jobs", json=_body(renamed, sol, "bob-1", idempotency_key="k1")).json()
        assert a["id"] != b["id"]  # idempotency keys are per client
        ra = alice.get(f"/v1/jobs/{a['id']}/wait?timeout=20").json()
        rb = bob.get(f"/v1/jobs/{b['id']}/wait?timeout=20").json()
        c = bob.post("/v1/jobs", json=_body(renamed, sol, "bob-2")).json()
        rc = bob.get(f"/v1/jobs/{c['id']}").json()
    assert c["cached"] and rc["status"] == "done"
    assert ra["result"]["request_id"] == "alice-secret" and ra["result"]["problem_key"] == "test/L1/double"
    for r, rid in ((rb, "bob-1"), (rc, "bob-2")):
        assert r["result"]["request_id"] == rid and r["result"]["problem_key"] == "test/L1/silu"
    assert rb["result"]["solution_hash"] == ra["result"]["solution_hash"]


def test_queue_quota_per_client_is_a_429(tenants, small_problem):
    srv, tokens = tenants
    with _http(srv, tokens["bob"]) as bob, _http(srv, tokens["alice"]) as alice:
        ids = [bob.post("/v1/jobs", json=_body(small_problem, f"class ModelNew: pass\n# sleep: 0.3\n# q{i}"))
               .json()["id"] for i in range(3)]
        r = bob.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# q-over"))
        assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
        assert alice.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# a-ok")).status_code == 202
        done = bob.post("/v1/jobs/wait", json={"ids": ids, "timeout": 30}).json()["jobs"]
        assert [j["status"] for j in done] == ["done"] * 3
        assert bob.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# q-after")).status_code == 202


def test_request_rate_per_client_is_a_429_with_retry_after(tenants):
    srv, tokens = tenants
    with _http(srv, tokens["carol"]) as carol, _http(srv, tokens["alice"]) as alice:
        codes, limited = [], None
        while limited is None and len(codes) < 1000:  # the burst, then the bucket runs dry
            r = carol.get("/v1/queue")
            codes.append(r.status_code)
            limited = r if r.status_code == 429 else None
        # the refusal itself says when to come back (a request after it may find the bucket refilled
        # on a slow machine, so nothing is asserted of a later one)
        assert codes[:30] == [200] * 30 and limited is not None
        assert int(limited.headers["Retry-After"]) >= 1
        assert alice.get("/v1/queue").status_code == 200  # another client's bucket is its own


def test_chunked_body_over_the_limit_is_a_413(tenants):
    srv, tokens = tenants

    def chunks():
        for _ in range(50):
            yield b" " * 10_000

    with _http(srv, tokens["alice"]) as alice:
        r = alice.post("/v1/jobs", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and r.json()["error"] == "request_too_large"
        assert alice.get("/v1/queue").status_code == 200


def test_metrics_at_root_with_route_and_status_labels(tenants):
    srv, tokens = tenants
    with _http(srv, tokens["alice"]) as alice:
        alice.get("/v1/jobs/nope")
        alice.post("/v1/jobs/wait", json={"ids": ["nope"], "timeout": 0})
    text = httpx.get(f"{srv.url}/metrics").text
    assert 'kernelgym_http_responses_total{route="/v1/jobs/{job_id}",method="GET",status="404"}' in text
    assert 'kernelgym_http_long_poll_seconds_count{route="/v1/jobs/wait",method="POST",status="200"}' in text
    assert 'kernelgym_http_request_seconds_count{route="/v1/jobs/wait"' not in text
    assert 'status="413"' in text and 'status="401"' in text and 'status="429"' in text
    assert httpx.get(f"{srv.url}/v1/metrics").status_code == 401  # the old path is no open door


def test_second_server_on_the_same_store_is_refused(tenants):
    srv, _ = tenants
    second = ServerProcess(srv.db, "--devices", "cpu:1", "--evaluator", DIRECTIVE)
    with pytest.raises(RuntimeError, match="another server"):
        second.start(timeout_s=60)
    assert httpx.get(f"{srv.url}/v1/health").status_code == 200


def test_default_server_evaluates_loaded_problems_by_key_only(tmp_path, small_problem):
    """Without --allow-custom-problems, reference code from a request is refused; a loaded problem
    is named by key (and the client's copy of it must match the server's)."""
    from drkernel.problems import load_problems

    gelu = next(p for p in load_problems("builtin") if p.name == "gelu")
    srv = ServerProcess(tmp_path / "jobs.sqlite", "--devices", "cpu:1", "--evaluator", DIRECTIVE,
                        custom=False).start()
    try:
        with _http(srv, srv.token) as c:
            r = c.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass"))
            assert r.status_code == 403 and r.json()["error"] == "custom_problems_disabled"
            r = c.post("/v1/jobs", json={"problem_key": gelu.key, "solution": "class ModelNew: pass"})
            assert r.status_code == 202, r.text
            tampered = {**gelu.to_dict(), "code": gelu.code + "\nimport os\n"}
            r = c.post("/v1/jobs", json={"problem_key": gelu.key, "problem": tampered, "solution": "x"})
            assert r.status_code == 422 and r.json()["error"] == "problem_mismatch"
        with ServiceClient(srv.url, srv.token) as client:  # the client sends key and problem
            assert client.evaluate(EvalRequest(gelu, "class ModelNew: pass\n# c"), timeout_s=30).correct
    finally:
        srv.stop()


def test_single_user_mode_generates_a_token(tmp_path):
    db = tmp_path / "solo.sqlite"
    srv = ServerProcess(db, "--devices", "cpu:1", "--evaluator", DIRECTIVE)
    srv.args.remove("--token")
    srv.args.remove(srv.token)
    srv.start()
    try:
        token = (tmp_path / "solo.sqlite.token").read_text().strip()
        assert (tmp_path / "solo.sqlite.token").stat().st_mode & 0o077 == 0
        assert httpx.get(f"{srv.url}/v1/queue").status_code == 401
        assert httpx.get(f"{srv.url}/v1/queue", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        srv.stop()
