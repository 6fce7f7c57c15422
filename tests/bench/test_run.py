"""`run_bench` end to end with the scripted policy and an in-memory evaluator: files, metrics,
resume after an interruption, reports, parquet, configs."""

import asyncio
import json
from pathlib import Path

import pytest
from agent.fakes import TableEvaluator
from agent.test_episode import OTHER, PROBLEM, TABLE, answer

from drkernel.agent import ScriptedPolicy
from drkernel.bench.io import read_episodes, read_rows
from drkernel.bench.report import write_report
from drkernel.bench.run import TRAJECTORIES, BenchConfig, run_bench
from drkernel.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = [
    (PROBLEM, [[answer("BROKEN"), answer("SLOW"), answer("FAST")], [answer("WRONG")]]),
    (OTHER, [[answer("HACK"), answer("FAST")]]),
]


def bench(out, evaluator=None, **cfg):
    config = BenchConfig(problems="inline", policy="scripted", samples=2, turns=3, **cfg)
    evaluator = evaluator or TableEvaluator(TABLE)
    policy = ScriptedPolicy.for_problems(SCRIPTS)
    return asyncio.run(run_bench(config, [PROBLEM, OTHER], policy, evaluator, out)), evaluator


def test_run_writes_chat_trajectories_and_metrics(tmp_path):
    metrics, evaluator = bench(tmp_path, format="parquet")
    rows = read_rows(tmp_path / TRAJECTORIES)
    assert sorted(r["id"] for r in rows) == sorted(
        [f"{PROBLEM.key}#0", f"{PROBLEM.key}#1", f"{OTHER.key}#0", f"{OTHER.key}#1"]
    )
    row = next(r for r in rows if r["id"] == f"{PROBLEM.key}#0")
    assert [m["role"] for m in row["messages"]][-2:] == ["user", "assistant"]
    assert row["outcomes"] == ["compile_error", "correct", "correct"]
    # turn 1: relu#0 broken, relu#1 wrong, other#0/#1 hacked -> Fast@0 = 0; turn 3: relu#0 FAST (2.0),
    # relu#1 WRONG, other FAST x2 -> Fast@0 = 3/4, Fast@1.5 = 3/4, Fast@3 = 0
    t1, _, t3 = metrics["per_turn"]
    assert t1["fast@0"] == 0 and t1["hacked"] == 0.5
    assert (t3["fast@0"], t3["fast@1.5"], t3["fast@3"]) == (0.75, 0.75, 0.0)
    assert metrics["levels"]["2"]["per_turn"][2]["fast@2"] == 1.0
    assert json.loads((tmp_path / "metrics.json").read_text())["per_turn"][2]["fast@0"] == 0.75
    parquet = read_rows(tmp_path / "trajectories.parquet")
    assert {r["id"] for r in parquet} == {r["id"] for r in rows}
    assert parquet[0]["messages"][0]["role"] == "system"
    assert len(evaluator.requests) == 12


def test_resume_after_interruption_equals_a_full_run(tmp_path):
    full, _ = bench(tmp_path / "full")
    out = tmp_path / "resumed"
    bench(out)
    lines = (out / TRAJECTORIES).read_text().splitlines()
    # an interruption: one episode lost, the next one torn mid-line
    (out / TRAJECTORIES).write_text("\n".join(lines[:2]) + "\n" + lines[2][:100])
    resumed, evaluator = bench(out)
    assert len(evaluator.requests) == 6  # the two missing episodes, 3 turns each
    assert len(read_episodes(out / TRAJECTORIES)) == 4
    for key in ("per_turn", "best_by_turn", "samples"):
        assert resumed[key] == full[key]
    _, again = bench(out)
    assert again.requests == []  # nothing left to run


def test_resume_refuses_another_configuration(tmp_path):
    bench(tmp_path)
    with pytest.raises(ConfigError, match="turns: saved 3 vs now 2"):
        asyncio.run(
            run_bench(
                BenchConfig(problems="inline", policy="scripted", samples=2, turns=2),
                [PROBLEM],
                ScriptedPolicy.for_problems(SCRIPTS),
                TableEvaluator(TABLE),
                tmp_path,
            )
        )


def test_report_has_tables_and_plots(tmp_path):
    bench(tmp_path)
    path = write_report(tmp_path)
    text = path.read_text()
    assert "| 3 | 75.0 | 75.0 | 75.0 | 75.0 | 75.0 | 0.0 |" in text  # Fast@0..3 at turn 3
    assert "## Level 2" in text
    for png in ("fast_by_turn.png", "speedups.png", "outcomes.png"):
        assert (tmp_path / png).stat().st_size > 1000 and f"]({png})" in text


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "configs" / "bench").glob("*.yaml")))
def test_shipped_configs_load(name):
    cfg = BenchConfig.from_yaml(REPO / "configs" / "bench" / name)
    if "tts" in name:
        assert cfg.episode_config().total_turns == 14 and cfg.episode_config().tts.window == 4
    elif name.startswith("kernelbench"):
        assert (cfg.samples, cfg.turns, cfg.temperature, cfg.top_p) == (8, 3, 1.0, 0.95)


def test_bad_config_keys_are_named(tmp_path):
    with pytest.raises(ConfigError, match="unknown bench config keys: \\['sampels'\\]"):
        BenchConfig.from_dict({"sampels": 3})
    with pytest.raises(ConfigError, match="unknown eval keys: \\['trails'\\]"):
        BenchConfig.from_dict({"eval": {"trails": 3}})
    with pytest.raises(ConfigError, match="eval.trials: expected int, got '3'"):
        BenchConfig.from_dict({"eval": {"trials": "3"}})


def test_report_cli(tmp_path):
    from typer.testing import CliRunner

    from drkernel.cli import app

    bench(tmp_path)
    result = CliRunner().invoke(app, ["bench", "report", str(tmp_path), "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "rep" / "report.md").exists() and (tmp_path / "rep" / "outcomes.png").exists()
    as_json = CliRunner().invoke(app, ["bench", "report", str(tmp_path), "--json"])
    assert json.loads(as_json.output)["samples"] == 4
    missing = CliRunner().invoke(app, ["bench", "report", str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and "has no metrics.json" in " ".join(missing.output.split())


class FlakyPolicy(ScriptedPolicy):
    """Fails every request for one problem, as an endpoint that is down would after its retries."""

    async def generate(self, batch, params):
        from drkernel.agent import Completion

        out = await super().generate(batch, params)
        return [
            Completion(text="", finish_reason="error", error="HTTP 503") if "* 2" in m[1]["content"] else c
            for m, c in zip(batch, out)
        ]


def test_policy_error_episodes_are_retried_by_a_rerun(tmp_path):
    config = BenchConfig(problems="inline", policy="scripted", samples=1, turns=2)
    flaky = FlakyPolicy.for_problems(SCRIPTS)
    metrics = asyncio.run(run_bench(config, [PROBLEM, OTHER], flaky, TableEvaluator(TABLE), tmp_path))
    assert metrics["run"]["policy_errors"] == 1 and metrics["samples"] == 1
    evaluator = TableEvaluator(TABLE)
    metrics = asyncio.run(
        run_bench(config, [PROBLEM, OTHER], ScriptedPolicy.for_problems(SCRIPTS), evaluator, tmp_path)
    )
    assert metrics["samples"] == 2 and [r.problem.key for r in evaluator.requests] == [OTHER.key] * 2
