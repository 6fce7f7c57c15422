"""What the `drkernel` command tells a newcomer: version, help, bad input, a missing CUDA device, an
unreachable model endpoint, and the stages of `gym eval` while it runs. Real commands, real gym."""

from __future__ import annotations

import json
import logging
import socket

import torch
from typer.testing import CliRunner

from drkernel import __version__
from drkernel.cli import app
from drkernel.gym.orchestrator.evaluator import STAGE_LOGGER

runner = CliRunner()
GELU_GOLD = "src/drkernel/problems/builtin/level1/gelu/gold.py"


def said(res) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(res.output.split())


def test_version():
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"drkernel {__version__}"


def test_sft_help_shows_its_options_not_a_command_slot():
    res = runner.invoke(app, ["sft", "--help"])
    assert res.exit_code == 0 and "--config" in res.output and "COMMAND" not in res.output


def test_a_level_with_no_problems_is_an_error():
    res = runner.invoke(app, ["problems", "list", "-p", "builtin:7"])
    assert res.exit_code == 2 and "no problems at level 7" in said(res) and "[1, 2, 3]" in said(res)
    assert runner.invoke(app, ["problems", "list", "-p", "builtin:2"]).exit_code == 0


def test_a_mistyped_problem_path_says_the_file_does_not_exist(tmp_path):
    typo = str(tmp_path / "refernce.py")
    res = runner.invoke(app, ["gym", "eval", "--problem", typo, "--solution", GELU_GOLD])
    assert res.exit_code == 2 and "no such file" in said(res) and "among" not in said(res)
    res = runner.invoke(app, ["problems", "show", str(tmp_path / "x.py")])
    assert res.exit_code == 2 and "no such file" in said(res)


def test_cuda_on_a_machine_without_it_is_a_clear_error(tmp_path):
    if torch.cuda.is_available():  # on a GPU host: a device past the last one
        device = f"cuda:{torch.cuda.device_count()}"
    else:
        device = "cuda"
    for args in (["gym", "eval", "--problem", "gelu", "--solution", GELU_GOLD, "--device", device],
                 ["demo", "--device", device, "--out", str(tmp_path)],
                 ["bench", "run", "-p", "builtin:1", "--policy", "scripted:builtin", "--device", device,
                  "--out", str(tmp_path / "b")],
                 ["gym", "serve", "--devices", device, "--db", str(tmp_path / "s.sqlite")],
                 ["train", "-c", "configs/train/smoke_cpu.yaml", "--set", f"eval.device={device}",
                  "--out", str(tmp_path / "t")],
                 ["agent", "serve-model", "tiny", "--device", device],
                 ["organism", "run", "--device", device, "--out", str(tmp_path / "o")]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        text = said(res)
        assert "CUDA is not available" in text or "CUDA device(s) visible" in text
        assert "Traceback" not in text
    assert not (tmp_path / "b" / "run.json").exists()  # nothing started
    assert not (tmp_path / "s.sqlite").exists() and not (tmp_path / "t").exists()
    assert not (tmp_path / "o").exists()


def _closed_port() -> int:
    with socket.socket() as s:  # bound, then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bench_run_against_an_unreachable_endpoint_fails_and_says_why(tmp_path):
    policy = f"openai:http://127.0.0.1:{_closed_port()}/v1,model=m,retries=0"
    out = tmp_path / "run"
    res = runner.invoke(app, ["bench", "run", "-p", "builtin:1", "--limit", "1", "--policy", policy,
                              "--samples", "1", "--turns", "1", "--no-report", "--out", str(out)])
    text = said(res)
    assert res.exit_code == 3, text
    assert "1 of 1 episode(s) ended in policy errors" in text and "ConnectError" in text
    assert json.loads((out / "metrics.json").read_text())["run"]["policy_errors"] == 1


def test_gym_eval_shows_its_stages_in_order():
    before = {name: list(logging.getLogger(name).handlers) for name in ("drkernel.cli.gym", STAGE_LOGGER)}
    res = runner.invoke(app, ["gym", "eval", "--problem", "gelu", "--solution", GELU_GOLD, "--device", "cpu",
                              "--trials", "1", "--json"])
    assert res.exit_code == 0, res.output
    stages = [ln.split("] ", 1)[1] for ln in res.output.splitlines() if ln.startswith("[") and "s] " in ln]
    assert stages[0] == "starting the judge process on cpu"
    expected = ["static checks", "running the reference", "running the solution", "correct; verdict checks"]
    positions = [next(i for i, s in enumerate(stages) if want in s) for want in expected]
    assert positions == sorted(positions), stages
    assert json.loads(res.output.strip().splitlines()[-1])["status"] == "correct"  # JSON stays parseable
    # the stage loggers are as they were: no handler is left on the stream the runner has closed by now
    # (every later stage line was a logging error, printed from several evaluation threads at once)
    for name in ("drkernel.cli.gym", STAGE_LOGGER):
        assert logging.getLogger(name).handlers == before[name]
