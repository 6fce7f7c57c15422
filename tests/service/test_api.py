"""The /v1 API on a real server subprocess (real SQLite file, real worker processes), through raw
HTTP and through the clients."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from service_evaluators import DirectiveEvaluator
from service_server import TOKEN

from drkernel.errors import ServiceError
from drkernel.gym.config import EvalRequest
from drkernel.gym.protocol import Evaluator
from drkernel.service.client import AsyncServiceClient, ServiceClient, ServiceEvaluator

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _body(problem, solution: str, **extra) -> dict:
    return {**EvalRequest(problem, solution).to_dict(), **extra}


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as c:
        yield c


@pytest.fixture(scope="module")
def client(server):
    with ServiceClient(server.url, TOKEN) as c:
        yield c


def test_health_workers_queue(server, http):
    health = httpx.get(f"{server.url}/v1/health").json()  # no token needed
    assert health["status"] == "ok" and health["workers_ready"] == health["workers_total"] == 2
    workers = http.get("/v1/workers").json()
    assert [w["state"] for w in workers] == ["ready", "ready"]
    assert {w["device_name"] for w in workers} == {"directive test device"}
    assert all(w["pid"] and w["budget_bytes"] > 0 for w in workers)
    assert set(http.get("/v1/queue").json()["counts"]) == {"queued", "running", "done", "failed", "cancelled"}
    assert "/v1/jobs/batch" in httpx.get(f"{server.url}/openapi.json").json()["paths"]


def test_auth_required(server, small_problem):
    r = httpx.post(f"{server.url}/v1/jobs", json=_body(small_problem, "class ModelNew: pass"))
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = httpx.get(f"{server.url}/v1/queue", headers={"Authorization": "Bearer wrong"})
    assert r.status_code == 401


def test_malformed_input_gets_clear_4xx(http, small_problem):
    r = http.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["error"] == "invalid_request"
    body = _body(small_problem, "x")
    del body["solution"]
    r = http.post("/v1/jobs", json=body)
    assert r.status_code == 422 and ["body", "solution"] in [d["loc"] for d in r.json()["detail"]]
    r = http.post("/v1/jobs", json={**_body(small_problem, "x"), "config": {"trails": 5}})
    assert r.status_code == 422 and ["body", "config", "trails"] in [d["loc"] for d in r.json()["detail"]]
    r = http.post("/v1/jobs", json={**_body(small_problem, "x"), "surprise": 1})
    assert r.status_code == 422
    r = http.post("/v1/jobs", json={**_body(small_problem, "x"), "config": {"tolerance": "loose"}})
    assert r.status_code == 422 and ["body", "config", "tolerance"] in [d["loc"] for d in r.json()["detail"]]
    assert http.get("/v1/jobs/unknown").status_code == 404
    assert http.delete("/v1/jobs/unknown").json()["error"] == "not_found"
    r = http.post("/v1/jobs", json=_body(small_problem, "#" * 300_000))
    assert r.status_code == 413 and r.json()["error"] == "request_too_large"
    r = http.post("/v1/jobs/batch", json={"requests": [_body(small_problem, f"# {i}") for i in range(51)]})
    assert r.status_code == 413 and "max_batch" in r.json()["detail"]
    assert http.post("/v1/jobs/batch", json={"requests": []}).status_code == 422


def test_submit_wait_result_equals_direct_evaluation(http, small_problem):
    solution = "class ModelNew: pass\n# sleep: 0.1\n# one"
    ref = http.post("/v1/jobs", json=_body(small_problem, solution, request_id="r1"))
    assert ref.status_code == 202 and ref.json()["status"] == "queued"
    job = http.get(f"/v1/jobs/{ref.json()['id']}/wait", params={"timeout": 20}).json()
    assert job["status"] == "done" and job["attempts"] == 1 and job["request_id"] == "r1"
    direct = DirectiveEvaluator().evaluate(EvalRequest(small_problem, solution, request_id="r1"))
    assert job["result"] == direct.to_dict()


def test_batch_order_duplicates_and_cache(http, small_problem):
    sols = [f"class ModelNew: pass\n# sleep: 0.05\n# b{i % 3}" for i in range(9)]
    jobs = http.post("/v1/jobs/batch", json={"requests": [_body(small_problem, s) for s in sols]}).json()[
        "jobs"
    ]
    ids = [j["id"] for j in jobs]
    done = http.post("/v1/jobs/wait", json={"ids": ids, "timeout": 30}).json()
    assert [j["id"] for j in done["jobs"]] == ids and done["missing"] == []
    assert all(j["status"] == "done" for j in done["jobs"])
    for i, j in enumerate(done["jobs"]):
        assert j["result"]["solution_hash"] == done["jobs"][i % 3]["result"]["solution_hash"]
    assert sum(not j["cached"] for j in done["jobs"]) == 3  # three evaluations for three distinct solutions
    many = http.post("/v1/jobs/wait", json={"ids": ids * 5 + ["no-such-job"], "timeout": 5}).json()
    assert many["jobs"] == done["jobs"] * 5 and many["missing"] == ["no-such-job"]
    assert many["jobs"][0] == http.get(f"/v1/jobs/{ids[0]}").json()
    again = http.post("/v1/jobs", json=_body(small_problem, sols[0])).json()
    assert again["status"] == "done" and again["cached"]


def test_idempotency_keys(http, small_problem):
    a = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass # k", idempotency_key="key-1"))
    b = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass # k", idempotency_key="key-1"))
    assert a.json()["id"] == b.json()["id"] and a.json()["created"] and not b.json()["created"]
    c = http.post("/v1/jobs", json=_body(small_problem, "another solution", idempotency_key="key-1"))
    assert c.status_code == 409 and c.json()["error"] == "idempotency_conflict"


def test_long_poll_times_out_then_cancel(http, small_problem):
    job_id = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# sleep: 3\n# c")).json()[
        "id"
    ]
    t0 = time.monotonic()
    job = http.get(f"/v1/jobs/{job_id}/wait", params={"timeout": 0.5}).json()
    assert job["status"] in ("queued", "running") and time.monotonic() - t0 >= 0.45
    assert http.delete(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"
    time.sleep(3.2)
    assert http.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"  # the late result does not land


def test_evaluator_exception_is_retried_once_then_failed(http, small_problem):
    job_id = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# raise")).json()["id"]
    job = http.get(f"/v1/jobs/{job_id}/wait", params={"timeout": 30}).json()
    assert job["status"] == "failed" and job["attempts"] == 2 and job["result"] is None
    assert job["error_class"] == "evaluator_error" and "RuntimeError" in job["error"]
    _wait_both_ready(http)


def _wait_both_ready(http) -> None:
    """Until the canary has cleared both devices (a worker re-checks its device after a failure or a crash)."""
    deadline = time.monotonic() + 60
    while [w["state"] for w in http.get("/v1/workers").json()] != ["ready", "ready"]:
        assert time.monotonic() < deadline, "the canary did not clear both devices"
        time.sleep(0.1)


def test_a_bad_solution_is_a_result_not_a_retry(http, small_problem):
    job_id = http.post(
        "/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# status: crashed")
    ).json()["id"]
    job = http.get(f"/v1/jobs/{job_id}/wait", params={"timeout": 30}).json()
    assert job["status"] == "done" and job["attempts"] == 1 and job["result"]["status"] == "crashed"


def test_metrics(http):
    _wait_both_ready(http)
    text = http.get("/metrics").text
    for needle in (
        "kernelgym_jobs_submitted_total",
        'kernelgym_errors_total{error_class="evaluator_error"} 2',
        'kernelgym_cache_hits_total{kind="submit"}',
        'kernelgym_cache_hits_total{kind="coalesced"}',
        'kernelgym_eval_results_total{status="correct"}',
        "kernelgym_job_latency_seconds_bucket",
        'kernelgym_workers{state="ready"} 2',
        'kernelgym_canary_total{outcome="passed"}',
    ):
        assert needle in text, needle


def test_sync_client_and_service_evaluator(server, client, small_problem):
    reqs = [EvalRequest(small_problem, f"class ModelNew: pass\n# s{i}", request_id=f"q{i}") for i in range(5)]
    direct = [DirectiveEvaluator().evaluate(r) for r in reqs]
    assert client.evaluate(reqs[0]) == direct[0]
    assert client.evaluate_many(reqs, progress=True) == direct
    ev = ServiceEvaluator(server.url, TOKEN)
    assert isinstance(ev, Evaluator)
    assert ev.evaluate(reqs[1]) == direct[1]
    assert asyncio.run(ev.evaluate_batch(reqs)) == direct
    ev.close()
    failing = client.submit(EvalRequest(small_problem, "class ModelNew: pass\n# raise\n# sync"))
    with pytest.raises(ServiceError, match="evaluator_error"):
        client.results([failing])


def test_async_client(server, small_problem):
    async def go():
        async with AsyncServiceClient(server.url, TOKEN) as c:
            reqs = [EvalRequest(small_problem, f"class ModelNew: pass\n# a{i}") for i in range(4)]
            ids = await asyncio.gather(
                *(c.submit(r, idempotency_key=f"async-{i}") for i, r in enumerate(reqs))
            )
            assert await c.submit(reqs[0], idempotency_key="async-0") == ids[0]
            results = await c.results(ids, timeout_s=30)
            assert [r.solution_hash for r in results] == [
                DirectiveEvaluator().evaluate(r).solution_hash for r in reqs
            ]
            assert (await c.queue())["depth"] >= 0

    asyncio.run(go())


def test_client_retries_then_reports_unreachable():
    with ServiceClient("http://127.0.0.1:9", retries=2, backoff_s=0.01) as c:
        t0 = time.monotonic()
        with pytest.raises(ServiceError, match="unreachable"):
            c.health()
        assert time.monotonic() - t0 < 5


def test_a_long_poll_answer_is_encoded_in_steps_and_gives_its_slot_back(monkeypatch):
    """`JobsOut` streamed `WAIT_CHUNK` jobs at a time is the JSON the model gives; the client's
    long-poll slot is held until the last byte, and given back if the reader leaves early."""
    import asyncio
    import json
    import types

    from drkernel.service import app as service_app
    from drkernel.service.schemas import JobOut, JobsOut

    monkeypatch.setattr(service_app, "WAIT_CHUNK", 2)
    jobs = [types.SimpleNamespace(id=f"j{i}", status=types.SimpleNamespace(value="done"), attempts=1, cached=False,
                                  worker="w", created=1.0, started=2.0, finished=3.0, error=None, error_class=None,
                                  request_id=f"r{i}", result_json=None, result=None) for i in range(5)]
    monkeypatch.setattr(service_app, "JobOut", types.SimpleNamespace(
        from_job=lambda j: JobOut(id=j.id, status="done", attempts=1, cached=False, worker="w", created_at=1.0,
                                  started_at=2.0, finished_at=3.0, error=None, error_class=None,
                                  request_id=j.request_id, result=None)))
    waits = service_app.WaitSlots(limit=1)

    async def read(limit=None):
        hold = waits.hold("alice")
        hold.__enter__()
        parts, stream = [], service_app._jobs_json(jobs, ["x"], hold)
        async for part in stream:
            parts.append(part)
            assert waits.total == 1  # held while the answer is being sent
            if limit and len(parts) == limit:
                await stream.aclose()  # the reader went away
                break
        return b"".join(parts)

    body = asyncio.run(read())
    assert waits.total == 0
    expected = JobsOut(jobs=[service_app.JobOut.from_job(j) for j in jobs], missing=["x"]).model_dump(mode="json")
    assert json.loads(body) == expected
    asyncio.run(read(limit=2))
    assert waits.total == 0


def test_a_json_body_is_parsed_off_the_event_loop_thread(monkeypatch):
    """The API's routes parse bodies in a worker thread with pydantic-core (which lets the loop run;
    ``json.loads`` of 32 MiB of numbers held it 1.3 s); a body it refuses is the same 422 as before."""
    import asyncio
    import json
    import threading

    import types

    import pydantic_core

    from drkernel.service import app as service_app
    from drkernel.service.gate import CLIENT_SCOPE_KEY, RateLimiter

    seen = []
    real = pydantic_core.from_json
    monkeypatch.setattr(service_app.pydantic_core, "from_json",
                        lambda b: seen.append(threading.get_ident()) or real(b))

    async def parse(body: bytes):
        async def receive():
            return {"type": "http.request", "body": body, "more_body": False}
        app = types.SimpleNamespace(state=types.SimpleNamespace(parse_budget=RateLimiter(1 << 20, 1 << 21)))
        scope = {"type": "http", "method": "POST", "headers": [], "path": "/", "app": app, CLIENT_SCOPE_KEY: "alice"}
        request = service_app._OffLoopJSON(scope, receive)
        return threading.get_ident(), await request.json()

    loop_thread, value = asyncio.run(parse(b'{"requests": [1.5, 2]}'))
    assert value == {"requests": [1.5, 2]} and seen and seen[0] != loop_thread
    with pytest.raises(json.JSONDecodeError):
        asyncio.run(parse(b'{"requests": [1.5, 2'))
