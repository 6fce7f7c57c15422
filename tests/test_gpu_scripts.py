"""The GPU host of `scripts/gpu_check.sh` lacks fastapi, pydantic, uvicorn, openai and ray: the scripts
of its service, agent, train and integrity sections must load with those five unimportable; the
sections themselves fail alone at their timeout; the sustained A/B and judge-compare benchmarks run, small, on CPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = (
    "benchmarks/worker_throughput_gpu.py",
    "benchmarks/agent_e2e_gpu.py",
    "benchmarks/train_gpu.py",
    "scripts/adversarial_gpu.py",
    "benchmarks/timing_repeatability.py",
    "benchmarks/gym_eval_cost.py",
    "scripts/newcomer_gpu.py",
    "benchmarks/sustained_load.py",
    "benchmarks/judge_compare.py",
    "benchmarks/train_dp_gpu.py",
)
ABSENT = ("fastapi", "pydantic", "uvicorn", "openai", "ray")

LOAD = """
import runpy, sys
ABSENT = {absent!r}

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not on the GPU host)", name=name)
        return None

sys.meta_path.insert(0, Absent())
for script in {scripts!r}:
    runpy.run_path(script, run_name="gpu_script_import_check")
print("loaded", ",".join(m for m in sys.modules if m.split(".")[0] in ABSENT))
"""


def test_gpu_section_scripts_load_without_the_web_stack():
    code = LOAD.format(absent=ABSENT, scripts=SCRIPTS)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "loaded", out.stdout


def _gpu_check(tmp_path: Path, body: str, timeout: str) -> subprocess.CompletedProcess:
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\n{body}\n")
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "PYTHON": str(fake), "SECTION_TIMEOUT": timeout, "OUT": str(tmp_path / "out")}
    return subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), "env", "service"],
        env=env, capture_output=True, text=True, timeout=60,
    )


def test_gpu_check_fails_a_hung_section_alone_at_its_timeout(tmp_path):
    out = _gpu_check(tmp_path, "exec sleep 30", "1")
    assert out.returncode == 1
    assert out.stdout.count("FAILED (timed out after 1 s; rc 124)") == 2, out.stdout
    assert "FAILED SECTIONS: environment service" in out.stdout


def test_gpu_check_passes_sections_that_finish(tmp_path):
    out = _gpu_check(tmp_path, "exit 0", "30")
    assert out.returncode == 0, out.stdout
    assert "--- environment: ok" in out.stdout and "ALL GPU CHECKS PASSED" in out.stdout


def test_sustained_load_ab_runs_both_timing_rules_side_by_side_on_cpu(tmp_path):
    # The GPU's sustained-ab section, run small on CPU: a broken script would cost a GPU call.
    out = tmp_path / "ab"
    res = subprocess.run(
        [sys.executable, "benchmarks/sustained_load.py", "--ab", "--device", "cpu", "--duration-s", "3",
         "--quick", "--concurrency", "1", "--pool-size", "1", "--levels", "1", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    runs = {name: json.loads((out / f"{name}.json").read_text())
            for name in ("sustained_load", "sustained_load_fixed")}
    assert runs["sustained_load"]["timing_rule"] == "adaptive"
    assert runs["sustained_load_fixed"]["timing_rule"] == "fixed"
    for summary in runs.values():
        assert summary["evaluations"] > 0 and "exclusive" in summary["overlapping_stage_seconds"]
        assert summary["exclusive_s_per_eval"] == 0.0  # nothing is timed on CPU: no exclusive hold
        assert len(summary["device"]["judge_busy_fraction"]) == summary["device"]["judges"]
    assert (out / "sustained_ab.png").stat().st_size > 0
    assert "SUMMARY sustained_ab evaluations/s adaptive" in res.stdout


def test_judge_compare_times_both_paths_on_cpu(tmp_path):
    out = tmp_path / "judge_compare.json"
    res = subprocess.run(
        [sys.executable, "benchmarks/judge_compare.py", "--device", "cpu", "--elements", str(1 << 18),
         "--repeats", "2", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    row = json.loads(out.read_text())
    assert row["plain_s"] > 0 and row["careful_s"] > 0 and row["speedup"] == row["careful_s"] / row["plain_s"]
