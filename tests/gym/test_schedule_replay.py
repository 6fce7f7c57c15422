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


def _replay_module():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import schedule_replay
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return schedule_replay


def test_a_stage_s_waits_come_out_of_its_steps_evenly_and_never_below_zero():
    sr = _replay_module()
    sc = sr.Script(0.0, [(1.0, {"op": "a"}), (0.6, {"op": "b"}), (0.2, {"op": "c"}), (0.5, {"op": "d"})], 0.1, None,
                   0.0, 0.0, False, stages=("start", "correctness", "correctness", "extra_runs"))
    out = sc.deflated({"correctness": 0.8, "extra_runs": 0.2})
    # correctness: 0.8 shared over its two steps, 0.4 each: 0.6 -> 0.2, 0.2 -> 0 (not -0.2); extra_runs 0.5 -> 0.3
    assert [round(s, 6) for s, _ in out.steps] == [1.0, 0.2, 0.0, 0.3]
    assert [h for _, h in out.steps] == [h for _, h in sc.steps] and sc.steps[1][0] == 0.6  # the original kept


def test_a_run_measured_with_holds_paused_at_exports_is_calibrated_and_replayed_as_measured(tmp_path):
    run = REPO / "benchmarks" / "results" / "sustained_yield_on_h100_2026-11-27.json"
    sr = _replay_module()
    scripts, measured = sr.load(run)
    assert measured["yield_at_exports"] and sr.recorded(measured).yield_at_exports
    judged = sorted(t for tags in sr.RUN_TAGS.values() for t in tags)  # 7: two runs judge two tags each
    for sc in scripts:  # every step has its stage; a correct row exports one comparison per judged tag
        assert len(sc.stages) == len(sc.steps)
        tags = [h["tag"] for _, h in sc.steps if h["op"] == "compare" and h["trial"] != "timing"]
        assert sorted(tags) in ([], judged)
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "benchmarks/schedule_replay.py", str(run), "--limit", "16", "--scale", "0.02",
                          "--calibrate", "2", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    done = json.loads(out.read_text())
    assert [c["round"] for c in done["calibration"]] == [0, 1]
    [r] = done["results"]  # the recorded setting, holds paused at exports as measured
    assert r["yield_at_exports"] and r["concurrency"] == 8 and r["evaluations"] == 16
