"""`benchmarks/schedule_replay.py`: a measured sustained run replayed through the real runtime (slots, judge
pool, device lock, warm pool, sessions) with a fake device. Rates are not asserted (they depend on this
machine's load); that every evaluation ends, each as its row did, at each setting is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN = REPO / "benchmarks" / "results" / "sustained_ab_adaptive_h100_2026-11-26.json"


def test_the_replay_runs_each_setting_through_the_real_runtime(tmp_path):
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "benchmarks/schedule_replay.py", str(RUN), "--limit", "24",
                          "--scale", "0.02", "--concurrency", "4", "8", "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    assert [r["concurrency"] for r in results] == [4, 8]
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


def test_a_correct_row_exports_one_comparison_per_judged_tag_and_the_run_replays_as_measured(tmp_path):
    run = REPO / "benchmarks" / "results" / "sustained_yield_defaults_h100_2026-11-27.json"
    sr = _replay_module()
    scripts, measured = sr.load(run)
    judged = sorted(t for tags in sr.RUN_TAGS.values() for t in tags)  # 7: two runs judge two tags each
    exported = [sorted(h["tag"] for _, h in sc.steps if h["op"] == "compare" and h["trial"] != "timing")
                for sc in scripts]
    assert all(tags in ([], judged) for tags in exported) and judged in exported
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "benchmarks/schedule_replay.py", str(run), "--limit", "16", "--scale", "0.02",
                          "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr[-3000:]
    [r] = json.loads(out.read_text())["results"]  # the recorded setting
    assert r["concurrency"] == measured["concurrency"] == 8 and r["evaluations"] == 16


@pytest.mark.parametrize("name", ["sustained_yield_on_h100_2026-11-27.json",
                                  "sustained_yield_sound_on_h100_2026-11-27.json"])
def test_a_run_measured_with_a_removed_setting_on_is_refused_in_one_line(tmp_path, name):
    """The H100 runs measured with the sessions' holds yielded at exports (either variant; the option is
    removed: x0.91 against the defaults) have waits in their stages that this runtime does not have."""
    run = REPO / "benchmarks" / "results" / name
    out = tmp_path / "replay.json"
    res = subprocess.run([sys.executable, "benchmarks/schedule_replay.py", str(run), "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True,
                         timeout=300, env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"})
    assert res.returncode == 1 and not out.exists()
    [line] = res.stderr.strip().splitlines()  # no traceback
    assert line.startswith("schedule_replay: ") and "yield" in line and line.endswith("not replayed")
    assert "SUMMARY" not in res.stdout
