"""benchmarks/service_scaling.py on CPU: the real server with 1 and 2 interpreter workers, a worker
killed mid-run, and Ray actors; none lost, every worker busy, the JSON's fields present.
The first two take 70-170 s on a 2-core host (slow); the Ray case about 40 s."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import service_scaling

RUN_FIELDS = {"name", "backend", "devices", "submitted", "terminal", "lost", "evals_per_s", "statuses",
              "latency_p50_s", "latency_p95_s", "per_worker", "worker_devices", "samples", "rows"}


def run(tmp_path: Path, *args: str) -> dict:
    argv = ["--device-kind", "cpu", "--quick", "--levels", "1", "--progress-s", "5", "--out", str(tmp_path),
            *args]
    assert service_scaling.main(argv) == 0  # no FAIL line
    return json.loads((tmp_path / "service_scaling.json").read_text())


def check_run(r: dict, workers: int) -> None:
    assert RUN_FIELDS <= set(r)
    assert r["submitted"] > 0 and r["lost"] == 0 and r["terminal"] == r["submitted"]
    assert len(r["per_worker"]) == workers and all(n > 0 for n in r["per_worker"].values()), r["per_worker"]
    assert sum(r["statuses"].values()) == r["submitted"]
    assert all(row["worker"] in r["per_worker"] for row in r["rows"] if row["job_status"] == "done")


@pytest.mark.slow
def test_scaling_one_and_two_cpu_workers(tmp_path):
    result = run(tmp_path, "--gpus", "1,2", "--duration-s", "6")
    assert set(result["runs"]) == {"local-k1", "local-k2"}
    check_run(result["runs"]["local-k1"], 1)
    check_run(result["runs"]["local-k2"], 2)
    assert set(result["scaling_efficiency"]) == {"1", "2"} and result["scaling_efficiency"]["1"] == 1.0
    assert set(result["runs"]["local-k2"]["worker_devices"].values()) == {"cpu"}


@pytest.mark.slow
def test_kill_one_worker_mid_run(tmp_path):
    result = run(tmp_path, "--gpus", "2", "--no-scaling", "--kill-one-worker", "--duration-s", "16")
    r = result["runs"]["local-k2-kill"]
    check_run(r, 2)
    kill = r["kill"]
    assert kill["victim"] in r["per_worker"] and kill["pid"] > 0
    assert kill["in_flight_finished"], kill["in_flight_final"]
    assert all("attempts 2" in v for v in kill["in_flight_final"].values())
    assert kill["others_kept_completing"], (kill["rate_before"], kill["rate_after"])
    assert kill["back_s"] is None or kill["back_s"] > kill["at_s"]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed")
def test_ray_actors_run_the_same_load(tmp_path):
    run(tmp_path, "--gpus", "1", "--duration-s", "6")
    result = run(tmp_path, "--gpus", "1", "--no-scaling", "--ray", "--duration-s", "6")
    assert set(result["runs"]) == {"local-k1", "ray-k1"}  # merged with the earlier call's run
    check_run(result["runs"]["ray-k1"], 1)
    assert result["runs"]["ray-k1"]["backend"] == "ray" and "1" in result["ray_over_local"]
