"""Property-based fuzz of the OpenAPI document (schemathesis) against a real server on 127.0.0.1:
whatever a generated request holds, the answer is never a 5xx, and afterwards every worker is ready
and a plain job still runs. Bounded: a few dozen examples per operation, no shrinking runs past
that, well under a minute on 2 cores."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from service_server import TOKEN

from drkernel.gym.config import EvalRequest

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_no_request_gets_a_5xx(server):
    """Every operation of the OpenAPI document, with generated valid and invalid inputs."""
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9
    for op, mode in ((op, mode) for op in operations for mode in schemathesis.GenerationMode):

        @given(case=op.as_strategy(mode))
        @settings(max_examples=15, deadline=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=list(HealthCheck), database=None)
        def no_5xx(case):
            response = case.call(headers=AUTH, timeout=30)
            assert response.status_code < 500, (op.label, response.status_code, response.text[:500])

        try:
            no_5xx()
        except Unsatisfiable:  # nothing to make invalid (an operation without parameters or body)
            assert mode is schemathesis.GenerationMode.NEGATIVE, op.label


def test_workers_unharmed_after_the_fuzz(server, small_problem):
    """Runs after the fuzz (same module, same server): no worker hung or lost, the queue drains."""
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=60) as c:
        body = {**EvalRequest(small_problem, "class ModelNew: pass\n# after fuzz").to_dict(),
                "problem_key": small_problem.key}
        job = c.post("/v1/jobs", json=body).json()["id"]
        assert c.get(f"/v1/jobs/{job}/wait?timeout=50").json()["status"] == "done"
        assert [w["state"] for w in c.get("/v1/workers").json()] == ["ready", "ready"]
        metrics = httpx.get(f"{server.url}/metrics").text
        assert not [line for line in metrics.splitlines() if 'status="5' in line]
        assert 'status="422"' in metrics and 'status="202"' in metrics  # both sides were generated
