"""`drkernel bench run` end to end: the real in-process gym on CPU (Triton interpreter), a scripted
policy replaying the built-in gelu's broken -> lazy -> gold answers, a resumed rerun, the report."""

import json

from typer.testing import CliRunner

from drkernel.cli import app
from drkernel.problems import builtin_solution, load_builtin


def test_bench_run_against_the_real_gym_on_cpu(tmp_path):
    gelu = next(p for p in load_builtin([1]) if p.name == "gelu")
    kb = tmp_path / "kb" / "level1"
    kb.mkdir(parents=True)
    (kb / "1_gelu.py").write_text(gelu.code)
    answers = [
        f"<answer>\n```python\n{builtin_solution(gelu, f)}```\n</answer>"
        for f in ("broken_syntax.py", "lazy_torch_most_rows.py", "gold.py")
    ]
    answers[1] = "<think>most rows can stay in PyTorch</think>\n" + answers[1]
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"problem": "1_gelu", "responses": answers}) + "\n")
    out = tmp_path / "run"
    config = tmp_path / "bench.yaml"
    config.write_text("samples: 1\nturns: 3\nevaluator: local\neval:\n  trials: 2\n  second_size: false\n")
    kb_spec, policy = f"{tmp_path / 'kb'}:1", f"scripted:{script}"
    args = ["bench", "run", "--config", str(config), "--problems", kb_spec, "--policy", policy]
    args += ["--device", "cpu", "--no-timing", "--set", "eval_concurrency=1", "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "[1/1] " in result.output and "#0 -> syntax_error -> correct -> correct" in result.output  # a log line
    (row,) = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert (
        len(row["episode"]["turns"][2]["result"]["trials"]) == 2
    )  # the YAML's eval settings reached the gym
    assert row["outcomes"][0] == "syntax_error" and row["outcomes"][2] == "correct"
    # correct, no timing on CPU: 0.5 + 0.5 * op coverage (the one reward pays op coverage where
    # nothing was profiled, as training does)
    assert row["rewards"][2] == 0.5 + 0.5 * 1.0
    feedback = row["messages"][3]["content"]
    assert "is not valid Python" in feedback and "Error (last lines)" in feedback
    assert "<think>" not in row["episode"]["turns"][2]["messages"][4]["content"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["timed"] is False
    assert metrics["per_turn"][0]["fast@0"] == 0.0 and metrics["per_turn"][2]["fast@0"] == 1.0
    assert metrics["per_turn"][2]["fast@1.2"] is None
    report = (out / "report.md").read_text()
    assert "n/m" in report and (out / "fast_by_turn.png").exists()
    again = CliRunner().invoke(app, args + ["--no-report"])
    assert again.exit_code == 0, again.output
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 1
    bad = CliRunner().invoke(app, [*args[:-2], "--out", str(out), "--turns", "2"])
    assert bad.exit_code == 2 and "another configuration" in " ".join(bad.output.split())
