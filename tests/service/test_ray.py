"""Scale-out on Ray: device workers as Ray actors on a real local Ray cluster, behind the same API."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest
import ray
import uvicorn
from service_evaluators import DirectiveEvaluator
from service_server import DIRECTIVE, TOKEN, free_port

from drkernel.gym.config import EvalRequest
from drkernel.service.app import create_app
from drkernel.service.client import ServiceClient
from drkernel.service.config import ServiceConfig
from drkernel.service.ray_backend import ray_workers


@pytest.fixture(scope="module")
def ray_cluster():
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here, os.environ.get("PYTHONPATH", "")]
    )  # actors import evaluators
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_server(ray_cluster, tmp_path_factory):
    """The app with Ray actors as workers, served by uvicorn in a background thread."""
    config = ServiceConfig(
        db_path=str(tmp_path_factory.mktemp("ray") / "jobs.sqlite"),
        evaluator=DIRECTIVE,
        ray_address="local",
        ray_cpu_workers=2,
        lease_s=3.0,
        token=TOKEN,
        allow_custom_problems=True,
    )
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(config), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    with ServiceClient(url, TOKEN, retries=10, backoff_s=0.2) as c:
        deadline = time.monotonic() + 120
        while not (server.started and c.health()["workers_ready"] == 2):
            assert time.monotonic() < deadline, "Ray workers did not come up"
            time.sleep(0.2)
    yield url
    server.should_exit = True
    thread.join(timeout=30)


def test_ray_workers_serve_the_api(ray_server, small_problem):
    with ServiceClient(ray_server, TOKEN) as c:
        workers = c.workers()
        assert [w["backend"] for w in workers] == ["ray", "ray"] and all(
            w["state"] == "ready" for w in workers
        )
        assert len({w["pid"] for w in workers}) == 2 and os.getpid() not in {w["pid"] for w in workers}
        reqs = [
            EvalRequest(small_problem, f"class ModelNew: pass\n# sleep: 0.05\n# ray{i}") for i in range(12)
        ]
        assert c.evaluate_many(reqs) == [DirectiveEvaluator().evaluate(r) for r in reqs]


def test_killed_actor_is_retried_and_replaced(ray_server, small_problem):
    with ServiceClient(ray_server, TOKEN) as c:
        job = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# sleep: 1.0\n# victim"))
        deadline = time.monotonic() + 30
        while (info := c.job(job)).status != "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        victim = next(w for w in c.workers() if w["name"] == info.worker)
        os.kill(victim["pid"], 9)
        done = c.collect([job], timeout_s=90)[job]
        assert done.status == "done" and done.attempts == 2 and done.result.correct
        deadline = time.monotonic() + 60
        while not all(w["state"] == "ready" for w in c.workers()):
            assert time.monotonic() < deadline, c.workers()
            time.sleep(0.2)
        assert victim["pid"] not in {w["pid"] for w in c.workers()}


def test_ray_placement_needs_something_to_run_on(ray_cluster):
    from drkernel.errors import ConfigError

    with pytest.raises(ConfigError, match="no GPU"):
        ray_workers(ServiceConfig(ray_address="local", ray_cpu_workers=0))
    planned = ray_workers(ServiceConfig(ray_address="local", ray_cpu_workers=3))
    assert [w.name for w in planned] == ["ray-cpu-0", "ray-cpu-1", "ray-cpu-2"]
    assert asyncio.iscoroutinefunction(planned[0].evaluate)
