"""`drkernel gym eval` end to end (a real evaluator behind the command): the readable table, JSON
for machines, and the documented exit codes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from drkernel.cli import app
from drkernel.cli.gym import markdown_table
from drkernel.gym import EvalResult, Status
from gym_cases import RELU_REFERENCE, RELU_SOLUTION

runner = CliRunner()


def write(tmp_path, solution: str):
    (tmp_path / "relu.py").write_text(RELU_REFERENCE)
    (tmp_path / "sol.py").write_text(solution)
    return ["gym", "eval", "--problem", str(tmp_path / "relu.py"), "--solution", str(tmp_path / "sol.py"),
            "--device", "cpu", "--trials", "1"]


def test_valid_solution_exits_0_with_json(tmp_path):
    res = runner.invoke(app, write(tmp_path, RELU_SOLUTION) + ["--json"])
    assert res.exit_code == 0, res.output
    r = EvalResult.from_json(res.output.strip().splitlines()[-1])
    assert r.status is Status.CORRECT and r.problem_key == "file/L1/relu"


def test_invalid_solution_exits_1_with_a_readable_table(tmp_path):
    res = runner.invoke(app, write(tmp_path, RELU_SOLUTION.replace("tl.maximum(x, 0.0)", "x")) + ["--profile",
                                                                                                 "kernelbench"])
    assert res.exit_code == 1
    assert "incorrect" in res.output and "kernelbench" in res.output and "error" in res.output


def test_bad_input_exits_2(tmp_path):
    args = write(tmp_path, RELU_SOLUTION)
    assert runner.invoke(app, args[:5] + [str(tmp_path / "missing.py")] + args[6:]).exit_code == 2
    assert runner.invoke(app, args + ["--profile", "loose"]).exit_code == 2
    assert runner.invoke(app, ["gym", "eval", "--problem", "no_such_problem", "--solution",
                               str(tmp_path / "sol.py")]).exit_code == 2


def test_a_reference_that_cannot_run_exits_2(tmp_path):
    args = write(tmp_path, RELU_SOLUTION)
    (tmp_path / "relu.py").write_text(RELU_REFERENCE.replace("torch.randn(batch_size, dim)", "undefined_name"))
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "reference problem cannot run" in res.output


def test_markdown_table_escapes_and_summarises():
    r = EvalResult(status=Status.RUNTIME_ERROR, error="Traceback\nValueError: a | b").finalize()
    md = markdown_table([("builtin/L1/gelu", "broken_shape", r)])
    header, rule, row = md.splitlines()[:3]
    assert header.count("|") == rule.count("|") == row.count("|")  # one cell per column, the pipe escaped
    assert row == ("| builtin/L1/gelu | broken_shape | runtime_error | no | - | - | - | - | - | - | "
                   "ValueError: a / b |")


@pytest.mark.slow
def test_demo_writes_markdown_and_json(tmp_path):
    res = runner.invoke(app, ["demo", "--out", str(tmp_path), "--device", "cpu", "--level", "1", "--limit", "1"])
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "results.json").read_text())
    by_label = {r["solution"]: r["result"]["status"] for r in rows}
    assert by_label["gold"] == "correct" and any(s != "correct" for s in by_label.values())
    md = (tmp_path / "results.md").read_text()
    assert "| gold | correct | yes |" in md
