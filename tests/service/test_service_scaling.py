"""benchmarks/service_scaling.py on CPU: the real server with 1 and 2 interpreter workers, a worker
killed mid-run, and Ray actors; none lost, every worker busy, the JSON's fields present.
The first two take 70-170 s on a 2-core host (slow); the Ray case about 40 s. The per-stage and host-load
figures are checked on hand-made rows and samples."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
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


def row(stages: dict[str, float], done_s: float, job_status: str = "done") -> service_scaling.Row:
    return service_scaling.Row("j", "p", "gold", job_status, "correct", None, 1, "w0", 0.0, done_s, done_s,
                               stages)


def test_stage_stats_over_the_window():
    # window [10, 20]: child_start 1, 2, 3, 4 (median 2.5, p95 the largest: 4), compile only in two
    rows = [row({"child_start": 1.0, "compile": 5.0}, 10.0), row({"child_start": 3.0}, 12.0),
            row({"child_start": 2.0, "compile": 7.0}, 15.0), row({"child_start": 4.0}, 20.0),
            row({"child_start": 100.0}, 9.9),  # warm-up: out
            row({"child_start": 100.0}, 20.1),  # drain: out
            row({"child_start": 100.0}, 15.0, job_status="failed")]  # no result
    stats = service_scaling.stage_stats(rows, 10.0, 20.0)
    assert list(stats) == ["compile", "child_start"]  # largest median first
    assert stats["child_start"] == {"n": 4, "median": 2.5, "p95": 4.0, "mean": 2.5}
    assert stats["compile"] == {"n": 2, "median": 6.0, "p95": 7.0, "mean": 6.0}


def test_load_stats_and_gpu_busy():
    samples = [{"t": t, "load1": l, "running": r, "cpu": {"user": 0.5, "system": s, "iowait": 0.0, "idle": 0.5 - s},
                "gpu": g} for t, l, r, s, g in (
        (0.5, 9.0, 9, 0.4, {"0": 0.0}),  # before the window
        (1.0, 2.0, 3, 0.1, {"0": 40.0, "1": 80.0}),
        (2.0, 4.0, 5, 0.3, {"0": 60.0}),  # GPU 1 missed a line
        (3.0, 3.0, 4, 0.2, {"0": 50.0, "1": 100.0}))]
    h = service_scaling.load_stats(samples, 1.0, 3.0)
    assert h["samples"] == 3
    assert h["load1"]["median"] == 3.0 and h["load1"]["p95"] == 4.0
    assert abs(h["cpu_system"]["mean"] - 0.2) < 1e-12
    assert h["gpu_util"]["1"]["n"] == 2
    assert abs(h["gpu_busy"]["0"] - 0.5) < 1e-12 and abs(h["gpu_busy"]["1"] - 0.9) < 1e-12
    assert service_scaling.load_stats([], 0.0, 1.0)["gpu_busy"] == {}


def test_cpu_split_and_host_load_sampler():
    # jiffies (user+nice, system+irq+softirq, iowait, idle, total): 100 more, 30 user, 20 system, 50 idle
    split = service_scaling.cpu_split((10.0, 10.0, 0.0, 80.0, 100.0), (40.0, 30.0, 0.0, 130.0, 200.0))
    assert split == {"user": 0.3, "system": 0.2, "iowait": 0.0, "idle": 0.5}
    host = service_scaling.HostLoad(0, time.monotonic(), period_s=0.05)
    deadline = time.monotonic() + 30.0
    while not host.samples and time.monotonic() < deadline:
        time.sleep(0.05)
    samples = host.stop()
    assert samples, "no sample from /proc in 30 s"
    s = samples[0]
    assert s["load1"] >= 0.0 and s["running"] >= 1 and s["gpu"] == {}
    assert all(0.0 <= v <= 1.0 for v in s["cpu"].values()) and sum(s["cpu"].values()) <= 1.0 + 1e-9  # steal aside
