"""`benchmarks/sustained_load.py --ab-candidate`: the mix under the defaults and under the candidate
configuration (compile cache, shared judge routing, other slots) side by side in one process, run small
on CPU so that a broken script does not cost a GPU call. Rates are not asserted (this machine's load)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))

from sustained_load import verdict_disagreements  # noqa: E402


def test_the_candidate_ab_runs_both_configurations_and_reports_their_verdicts(tmp_path):
    out = tmp_path / "cc"
    res = subprocess.run(
        [sys.executable, "benchmarks/sustained_load.py", "--ab-candidate", "--device", "cpu", "--duration-s", "3",
         "--quick", "--concurrency", "1", "--pool-size", "1", "--levels", "1", "--candidate-concurrency", "2",
         "--candidate-pool-size", "2", "--candidate-judges", "2", "--candidate-judge-routing", "shared",
         "--candidate-region-batch", "2", "1", "--fail-fraction", "0.3", "--out", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    base = json.loads((out / "sustained_load.json").read_text())
    cand = json.loads((out / "sustained_load_candidate.json").read_text())
    assert base["setting"]["compile_cache"] is False and base["device"]["compile_cache"] is None
    assert base["device"]["judge_routing"] == "sticky"
    assert cand["setting"] == {"concurrency": 2, "pool_size": 2, "judges": 2, "judge_routing": "shared",
                               "compile_cache": True, "timing_rule": "adaptive", "region_batch": [2, 1.0]}
    assert cand["device"]["judge_routing"] == "shared" and cand["device"]["compile_cache"] is not None
    assert cand["device"]["region_batch"] == [2, 1.0] and base["device"]["region_batch"] is None
    assert base["evaluations"] > 0 and cand["evaluations"] > 0
    assert "SUMMARY sustained_cc verdicts agree: True" in res.stdout
    assert "SUMMARY sustained_cc evaluations/s defaults" in res.stdout


def rows(*outcomes: tuple[str, str, str, bool]) -> dict:
    return {"rows": [{"problem": p, "label": label, "status": status, "valid": valid}
                     for p, label, status, valid in outcomes]}


def test_verdicts_that_share_nothing_disagree_and_verdicts_that_vary_are_listed_apart():
    a = rows(("relu", "gold", "correct", True), ("relu", "wrong", "incorrect", False),
             ("gemm", "slow", "correct", True), ("gemm", "slow", "correct", False),
             ("softmax", "gold", "infrastructure_error", False))
    b = rows(("relu", "gold", "incorrect", False), ("relu", "wrong", "incorrect", False),
             ("gemm", "slow", "correct", True), ("softmax", "gold", "correct", True))
    disjoint, varying = verdict_disagreements(a, b)
    # relu/gold: correct in one run, incorrect in the other; gemm/slow: one verdict in common; softmax/gold
    # had only an infrastructure error in the first run (no verdict), so it is not compared
    assert [line.split(":")[0] for line in disjoint] == ["relu/gold"]
    assert [line.split(":")[0] for line in varying] == ["gemm/slow"]
