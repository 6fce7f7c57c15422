"""benchmarks/train_dp_gpu.py: it loads on the bare GPU host (no web stack, pyyaml or pydantic), and its
CPU dry run (1 and 2 gloo ranks on one fixed batch, then the kernel task on 2 ranks) passes its checks
and writes its report."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "train_dp_gpu.py"
ABSENT = ("fastapi", "pydantic", "uvicorn", "openai", "ray", "yaml", "typer", "rich")

LOAD = """
import runpy, sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {absent!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Absent())
runpy.run_path({script!r}, run_name="import_check")
print("loaded")
"""


def test_loads_without_the_web_stack():
    code = LOAD.format(absent=ABSENT, script=str(SCRIPT))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "loaded"


@pytest.mark.slow
def test_cpu_dry_run(tmp_path):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--device", "cpu", "--nproc-list", "1,2", "--out", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "train_dp: 6/6 checks passed" in out.stdout, out.stdout[-3000:]
    report = json.loads((tmp_path / "train_dp.json").read_text())
    one, two = report["dp"]
    assert (one["nproc"], two["nproc"]) == (1, 2) and two["devices"] == ["cpu", "cpu"]
    assert one["train_tokens_per_step"] == two["train_tokens_per_step"] == 4 * 4 * 32  # rows x tokens
    assert two["tokens_per_s"] > 0 and two["scaling"] > 0
    assert all(p == two["prints"][0] for p in two["prints"])
    assert report["kernel"]["devices_per_rank"] == {"0": {"cpu": 4}, "1": {"cpu": 4}}
    names = {c["name"] for c in report["checks"]}
    assert "dp2 loss/grad_norm equals one process" in names and "kernel evaluations on cpu" in names
    assert (tmp_path / "train_dp.png").exists()
