"""A request for ``device: "auto"`` is estimated at the size its judge will prepare: ``auto`` runs on
the device of the worker that claims it, so on a server of CPU workers it is prepared (and estimated)
at its CPU size, and where a GPU worker may claim it, at the GPU's (the larger). A real server's store
holds the estimate admission made."""

from __future__ import annotations

import sqlite3

import httpx
import pytest
from service_server import DIRECTIVE, ServerProcess

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.problems.problem import Problem
from drkernel.service.admission import FOOTPRINT_FACTOR, OVERHEAD_BYTES, estimate_device_bytes

REF = """
import torch
batch_size = 4096
dim = 1024
def get_inputs():
    return [torch.randn(batch_size, dim)]
def get_init_inputs():
    return []
"""
OVERRIDES = {"batch_size": 2}
FULL = OVERHEAD_BYTES + FOOTPRINT_FACTOR * 4096 * 1024 * 4  # 4096 x 1024 float32 inputs
CPU_SIZE = OVERHEAD_BYTES + FOOTPRINT_FACTOR * 2 * 1024 * 4  # the overrides' 2 x 1024


def _estimate(device: str, served: tuple[str, ...]) -> int:
    problem = Problem(name="t", level=1, code=REF, cpu_overrides=OVERRIDES)
    return estimate_device_bytes(EvalRequest(problem, "", EvalConfig(device=device)), served)


def test_auto_is_estimated_where_the_workers_that_may_claim_it_prepare_it():
    assert _estimate("auto", ("cpu", "cpu")) == _estimate("cpu", ("cpu", "cpu")) == CPU_SIZE
    assert _estimate("auto", ("cpu", "cuda:0")) == FULL  # a GPU worker may claim it: the larger
    assert _estimate("auto", ("cuda:0",)) == FULL
    assert _estimate("auto", ()) == FULL  # no worker known: never under
    assert _estimate("cpu", ("cuda:0",)) == CPU_SIZE and _estimate("cuda", ("cpu",)) == FULL


@pytest.fixture(scope="module")
def cpu_server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("auto") / "jobs.sqlite", "--devices", "cpu:1",
                        "--evaluator", DIRECTIVE)
    srv.start()
    yield srv
    srv.stop()


def test_a_cpu_server_admits_an_auto_request_at_its_cpu_size(cpu_server):
    problem = {"name": "wide", "level": 1, "code": REF, "source": "test", "cpu_overrides": OVERRIDES}
    ids = {}
    with httpx.Client(base_url=cpu_server.url, timeout=60,
                      headers={"Authorization": f"Bearer {cpu_server.token}"}) as http:
        for device in ("auto", "cpu"):
            r = http.post("/v1/jobs", json={"problem": problem, "solution": f"# {device}",
                                            "config": {"device": device}})
            assert r.status_code == 202, r.text
            ids[device] = r.json()["id"]
    with sqlite3.connect(f"file:{cpu_server.db}?mode=ro", uri=True) as db:
        est = {d: db.execute("SELECT est_bytes FROM jobs WHERE id = ?", (i,)).fetchone()[0] for d, i in ids.items()}
    assert est == {"auto": CPU_SIZE, "cpu": CPU_SIZE}
