"""End to end with the real gym: a server whose CPU interpreter workers run `InProcessEvaluator`,
real Triton solutions, results compared with direct in-process evaluation; and the small version
of the load benchmark (300 jobs, 5 clients)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from server import ServerProcess

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.service.client import ServiceClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from service_load import comparable, direct_evaluations, problems, run_clients, solution, verify  # noqa: E402

@pytest.fixture(scope="module")
def pool():
    """Four real Triton solutions with four different verdicts."""
    probs, config = problems(), EvalConfig(device="cpu", trials=2, second_size=False)
    picks = [("add", "correct"), ("mul", "wrong"), ("add_relu", "syntax_error"), ("scaled_sub", "no_modelnew")]
    return [EvalRequest(probs[op], solution(op, kind, 128, i), config) for i, (op, kind) in enumerate(picks)]


@pytest.fixture(scope="module")
def direct(pool):
    return direct_evaluations(pool)


@pytest.fixture(scope="module")
def gym_server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("gym") / "jobs.sqlite", "--devices", "cpu:1").start(timeout_s=300)
    yield srv
    srv.stop()


def test_default_worker_is_the_real_gym(gym_server):
    with ServiceClient(gym_server.url) as c:
        worker, = c.workers()
        assert worker["device_name"] == "cpu (triton interpreter)" and worker["state"] == "ready"


def test_real_solutions_match_direct_evaluation(gym_server, pool, direct):
    assert sorted(d["status"] for d in direct.values()) == ["correct", "incorrect", "no_modelnew", "syntax_error"]
    with ServiceClient(gym_server.url) as c:
        results = c.evaluate_many(pool)
        assert [comparable(r) for r in results] == [direct[r.solution_hash] for r in results]
        again = c.submit_batch(pool)
        assert all(c.job(i).cached for i in again)  # a duplicate costs nothing


def test_small_load(gym_server, pool, direct):
    run = run_clients(gym_server.url, None, pool, jobs=300, clients=5, seed=1)
    check = verify(run, pool, direct, jobs=300)
    assert check["lost"] == check["duplicated_ids"] == check["mismatches"] == 0 and check["submitted"] == 300
