"""`drkernel train`: runs a config to completion, resumes, and maps bad configs to exit code 2."""

from pathlib import Path

from typer.testing import CliRunner

from drkernel.cli import app
from drkernel.rl.metrics_log import read_metrics

SANITY = str(Path(__file__).resolve().parents[2] / "configs" / "train" / "sanity_cpu.yaml")
SMALL = [
    "--set",
    "model.tiny_hidden=32",
    "--set",
    "rollout.prompts_per_step=2",
    "--set",
    "rollout.samples_per_prompt=2",
    "--set",
    "rollout.max_tokens=4",
]


def test_train_command_runs_and_resumes(tmp_path):
    runner = CliRunner()
    first = runner.invoke(app, ["train", "--config", SANITY, "--out", str(tmp_path), "--steps", "1", *SMALL])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["train", "--config", SANITY, "--out", str(tmp_path), "--steps", "2", *SMALL])
    assert second.exit_code == 0, second.output
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1, 2]


def test_train_command_bad_config_exits_2(tmp_path):
    result = CliRunner().invoke(
        app, ["train", "--config", SANITY, "--out", str(tmp_path), "--set", "optim.lr=-1"]
    )
    assert result.exit_code == 2
    assert "optim.lr" in result.output
    missing = CliRunner().invoke(app, ["train", "--config", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2
