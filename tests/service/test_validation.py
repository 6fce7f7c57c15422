"""Issue 13, defect 1: every invalid value is refused at submission with a 4xx naming the field,
no body produces a 5xx, and nothing of the server (tracebacks, paths) reaches a client. Against the
module's real server (2 directive workers, auth on, custom problems allowed)."""

from __future__ import annotations

import json

import httpx
import pytest
from service_server import TOKEN

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.service.config import ServiceConfig
from drkernel.service.schemas import config_model, valid_problem_key
from drkernel.service.scheduler import Scheduler
from drkernel.service.store import Job, JobStatus

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30) as c:
        yield c


def _body(problem, solution="class ModelNew: pass\n# v", **config) -> dict:
    return {**EvalRequest(problem, solution).to_dict(), "problem_key": problem.key, "config": config}


def _raw(body: dict) -> bytes:
    return json.dumps(body, allow_nan=True).encode()  # NaN and Infinity as JSON tokens, as an attacker sends


BAD_CONFIGS = [
    ({"trials": 10**12}, "trials"),
    ({"trials": "5"}, "trials"),
    ({"trials": 5.0}, "trials"),
    ({"trials": True}, "trials"),
    ({"timeout_s": "abc"}, "timeout_s"),
    ({"timeout_s": 1e9}, "timeout_s"),
    ({"timeout_s": float("nan")}, "timeout_s"),
    ({"timeout_s": float("inf")}, "timeout_s"),
    ({"timeout_s": -1}, "timeout_s"),
    ({"timeout_s": 0}, "timeout_s"),
    ({"rss_limit_mb": -1}, "rss_limit_mb"),
    ({"seed": 2**80}, "seed"),
    ({"seed": -1}, "seed"),
    ({"strict_allowlist": 5}, "strict_allowlist"),
    ({"strict_allowlist": ["x" * 300]}, "strict_allowlist"),
    ({"timing": 5}, "timing"),
    ({"timing": "true"}, "timing"),
    ({"device": "cuda:99999"}, "device"),
    ({"device": "../../dev/mem"}, "device"),
    ({"warmup_calls": 10**9}, "warmup_calls"),
    ({"memory_fraction": 0}, "memory_fraction"),
    ({"cpu_element_budget": 0}, "cpu_element_budget"),
]


@pytest.mark.parametrize("config,field", BAD_CONFIGS, ids=[f"{k}={v!r}"[:40] for k, v in (
    next(iter(c.items())) for c, _ in BAD_CONFIGS)])
def test_bad_config_value_is_a_422_naming_the_field(http, small_problem, config, field):
    r = http.post("/v1/jobs", content=_raw(_body(small_problem, **config)),
                  headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert ["body", "config", field] in [d["loc"][:3] for d in r.json()["detail"]], r.text
    assert "Traceback" not in r.text and "/work/" not in r.text and "site-packages" not in r.text


def test_keep_alive_connection_survives_a_bad_body(http, small_problem):
    """A refused body (once a 500 that reset the connection) leaves the connection usable."""
    for bad in ({"trials": "5"}, {"strict_allowlist": 5}):
        assert http.post("/v1/jobs", json=_body(small_problem, **bad)).status_code == 422
        assert http.get("/v1/queue").status_code == 200


def test_device_the_server_does_not_run_is_refused(http, small_problem):
    r = http.post("/v1/jobs", json=_body(small_problem, device="cuda:99"))
    assert r.status_code == 422 and r.json()["error"] == "device_unavailable"
    assert r.json()["detail"][0]["loc"] == ["body", "config", "device"]
    r = http.post("/v1/jobs/batch", json={"requests": [_body(small_problem), _body(small_problem, device="cuda")]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "requests", 1, "config", "device"]


@pytest.mark.parametrize("problem_change,field", [
    ({"cpu_overrides": {"N": 1e30}}, "cpu_overrides"),
    ({"cpu_overrides": {"N": 10**30}}, "cpu_overrides"),
    ({"name": "../../etc/passwd"}, "name"),
    ({"source": "../../etc"}, "source"),
    ({"level": "1"}, "level"),
    ({"dtype": "complex1024"}, "dtype"),
])
def test_bad_problem_value_is_a_422(http, small_problem, problem_change, field):
    body = _body(small_problem)
    body["problem"].update(problem_change)
    del body["problem_key"]
    r = http.post("/v1/jobs", json=body)
    assert r.status_code == 422 and field in json.dumps(r.json()["detail"]), r.text


def test_problem_key_with_a_path_is_refused(http, small_problem):
    for key in ("../../etc/L1/../../etc/passwd", "test/L1/..", "test/L9/double", "/etc/L1/passwd"):
        r = http.post("/v1/jobs", json={**_body(small_problem), "problem_key": key})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "problem_key", (key, r.text)
    assert not valid_problem_key("a/L1/..x") and valid_problem_key("builtin/L1/gelu")


def test_cross_field_rule_is_a_422(http, small_problem):
    r = http.post("/v1/jobs", json=_body(small_problem, timed_calls=100, timed_calls_max=50))
    assert r.status_code == 422 and "timed_calls_max" in r.json()["detail"]


def test_valid_edges_are_accepted(http, small_problem):
    r = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# edges", trials=100,
                                          timeout_s=900, seed=2**32 - 1, strict_allowlist=["aten::add.Tensor"]))
    assert r.status_code == 202, r.text


def test_seed_may_be_null_so_the_gym_draws_secret_seeds(http, small_problem):
    r = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# null seed", seed=None))
    assert r.status_code == 202, r.text
    r = http.post("/v1/jobs", json=_body(small_problem, "class ModelNew: pass\n# str seed", seed="7"))
    assert r.status_code == 422 and r.json()["detail"][0]["loc"][-1] == "seed", r.text


def test_every_evalconfig_field_is_bounded_at_the_api():
    """One source of truth: the API's config model has exactly EvalConfig's fields and defaults,
    and its bounds follow the server's configured maxima."""
    model = config_model(ServiceConfig(max_trials=7))
    assert model().model_dump() == EvalConfig().to_dict()
    assert model(trials=7).trials == 7
    with pytest.raises(ValueError):
        model(trials=8)


def test_worker_deadline_is_bounded_for_any_stored_request():
    """The watchdog's deadline never depends on a value a worker could fail to read (the job with
    ``timeout_s: "abc"`` that once stayed running forever)."""
    cfg = ServiceConfig(max_timeout_s=50.0, job_timeout_grace_s=10.0)
    sched = Scheduler(store=None, handles=[], config=cfg)  # type: ignore[arg-type]
    for request_json in ('{"config": {"timeout_s": "abc"}}', '{"config": {"timeout_s": NaN}}',
                         '{"config": {"timeout_s": 1e9}}', '{"config": []}', "not json", None):
        job = Job(id="j", status=JobStatus.RUNNING, req_hash="h", request_json=request_json, est_bytes=0,
                  priority=0, attempts=1, claim="c", worker="w", created=0.0, started=0.0, finished=None,
                  result_json=None, error=None, error_class=None, cached=False, idem_key=None, request_id="")
        assert sched._deadline_s(job) == 60.0, request_json


@pytest.mark.parametrize("raw", [
    b"[" * 100_000 + b"]" * 100_000,  # nesting deeper than the parser's recursion
    b'{"solution": "x", "priority": ' + b"9" * 5000 + b"}",  # an int past Python's digit limit
    b'{"solution": "\\ud800"}',  # a lone surrogate
    b'{"solution": "\xff\xfe"}',  # not UTF-8
    b"null", b"1e999999", b"",
], ids=["deep", "bigint", "surrogate", "not-utf8", "null", "huge-number", "empty"])
def test_malformed_bodies_are_4xx_not_5xx(http, raw):
    r = http.post("/v1/jobs", content=raw, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500 and r.json()["error"] in ("invalid_body", "invalid_request"), r.text
    assert http.get("/v1/queue").status_code == 200


def test_error_texts_carry_no_server_paths():
    from drkernel.service.schemas import public_text

    assert public_text("FileNotFoundError: /work/x/y.py missing\nTraceback ...") == (
        "FileNotFoundError: <path> missing")


def test_the_clients_payload_for_every_builtin_problem_is_valid():
    """The bounds refuse no honest request: the client's body for each built-in problem (key and
    problem together, default config) validates."""
    from drkernel.problems import load_builtin
    from drkernel.service.client import _payload
    from drkernel.service.schemas import request_models

    models = request_models(ServiceConfig())
    for p in load_builtin():
        models.request.model_validate(_payload(EvalRequest(p, "class ModelNew: pass"), None, 0))
