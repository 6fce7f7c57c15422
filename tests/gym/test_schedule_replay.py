"""`benchmarks/schedule_replay.py`: a measured sustained run replayed through the real runtime (slots, judge
pool, device lock, warm pool, sessions) with a fake device. Rates are not asserted (they depend on this
machine's load); that every evaluation ends, each as its row did, at each setting is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "benchmarks" / "results" / "sustained_ab_adaptive_h100_2026-11-26.json"


def test_the_replay_runs_each_setting_through_the_real_runtime(tmp_path):
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "benchmarks/schedule_replay.py", str(RUN), "--limit", "24",
                          "--scale", "0.02", "--concurrency", "4", "8", "--yield-at-exports", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [r["concurrency"] for r in results] == [4, 4, 8, 8]  # each also with holds paused at exports
    assert sum("paused at exports" in r["setting"] for r in results) == 2
    for r in results:
        assert r["evaluations"] == 24 and r["evals_per_s"] > 0
        # the replayed rows include timed evaluations: their regions were held for the measured time
        assert r["stage_seconds"]["exclusive"] > 0
    assert "SUMMARY replay" in res.stdout


def test_the_replay_combines_the_compile_cache_routing_and_batched_regions(tmp_path):
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "benchmarks/schedule_replay.py", str(RUN), "--limit", "40", "--scale", "0.02",
                          "--concurrency", "8", "--judges", "2", "--judge-routing", "sticky", "shared",
                          "--hit-s", "-1", "0.1", "--region-batch", "3", "1", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert len(results) == 8  # 2 routings x cache off/on x batched or not
    for r in results:
        assert r["evaluations"] == 40
        # the first 40 rows repeat some solutions: with the cache on their compile is a hit, never without
        assert (r["compile_hits"] > 0) == (r["hit_s"] is not None)
    assert {(r["routing"], r["batch"] is None) for r in results} == {
        ("sticky", True), ("sticky", False), ("shared", True), ("shared", False)}
