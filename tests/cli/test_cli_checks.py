"""Bad options are refused before any work (one line, exit code 2), the one ``--set`` override, the
device type, and the summaries a run ends with. Real commands through typer's runner."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from drkernel.cli import app
from drkernel.cli.devices import Device, DeviceKind
from drkernel.cli.gym import demo_summary
from drkernel.cli.train import summary
from drkernel.errors import ConfigError
from drkernel.gym import EvalResult, Status

runner = CliRunner()
GELU_GOLD = "src/drkernel/problems/builtin/level1/gelu/gold.py"


def said(res) -> str:
    return " ".join(res.output.split())


@pytest.mark.parametrize("args", [
    ["demo", "--out", "/proc/drkernel-nope"],
    ["bench", "run", "-p", "builtin:1", "--out", "/proc/drkernel-nope"],
    ["sft", "-c", "configs/sft/tiny_cpu.yaml", "--out", "/proc/drkernel-nope"],
    ["train", "-c", "configs/train/smoke_cpu.yaml", "--out", "/proc/drkernel-nope"],
])
def test_an_output_folder_that_cannot_be_written_is_refused_first(args):
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "/proc/drkernel-nope" in said(res) and "not writable" in said(res)
    assert "Traceback" not in res.output


def test_an_output_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    res = runner.invoke(app, ["demo", "--out", str(tmp_path / "f")])
    assert res.exit_code == 2 and "is not a folder" in said(res)


@pytest.mark.parametrize("args, option", [
    (["demo", "--limit", "-1"], "--limit"),
    (["demo", "--level", "4"], "--level"),
    (["demo", "--concurrency", "0"], "--concurrency"),
    (["gym", "eval", "gelu", GELU_GOLD, "--timeout", "-5"], "--timeout"),
    (["gym", "eval", "gelu", GELU_GOLD, "--trials", "0"], "--trials"),
    (["bench", "run", "-p", "builtin:1", "--samples", "0", "--out", "x"], "--samples"),
    (["bench", "run", "-p", "builtin:1", "--top-p", "1.5", "--out", "x"], "--top-p"),
    (["train", "-c", "configs/train/smoke_cpu.yaml", "--steps", "0"], "--steps"),
])
def test_numbers_out_of_range_are_refused_before_any_work(args, option, tmp_path):
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and option in res.output, res.output


def test_set_overrides_any_field_and_names_a_bad_one(tmp_path):
    res = runner.invoke(app, ["gym", "eval", "gelu", GELU_GOLD, "--set", "trails=3"])
    assert res.exit_code == 2 and "trails" in said(res)
    res = runner.invoke(app, ["bench", "run", "-p", "builtin:1", "-s", "history=sometimes",
                              "--out", str(tmp_path / "b")])
    assert res.exit_code == 2 and "history='sometimes'" in said(res)
    res = runner.invoke(app, ["sft", "-c", "configs/sft/tiny_cpu.yaml", "-s", "lr_scheduler=wavy",
                              "--out", str(tmp_path / "s")])
    assert res.exit_code == 2 and "lr_scheduler='wavy'" in said(res)
    res = runner.invoke(app, ["gym", "serve", "--db", str(tmp_path / "x.sqlite"), "-s", "max_attempts=zero"])
    assert res.exit_code == 2 and "max_attempts" in said(res)


def test_gym_eval_takes_its_arguments_once():
    res = runner.invoke(app, ["gym", "eval", "gelu", GELU_GOLD, "--problem", "gelu"])
    assert res.exit_code == 2 and "give PROBLEM once" in said(res)


@pytest.mark.parametrize("command", [["gym", "eval"], ["demo"], ["bench", "run"], ["train"], ["sft"],
                                     ["gym", "serve"], ["agent", "serve-model"], ["organism", "suite"]])
def test_every_option_has_help_and_h_works(command):
    import click
    import typer.main

    res = runner.invoke(app, [*command, "-h"])
    assert res.exit_code == 0 and "Usage:" in res.output and "…" not in res.output  # wrapped, never cut
    cmd = typer.main.get_command(app)
    for name in command:
        cmd = cmd.commands[name]
    undocumented = [p.name for p in cmd.params if isinstance(p, click.Option) and not p.help]
    assert undocumented == []


def test_demo_help_names_every_kind_of_solution():
    text = said(runner.invoke(app, ["demo", "-h"]))
    assert all(kind in text for kind in ("gold", "broken", "lazy", "slow", "summary"))


def test_devices_parse_one_way():
    assert Device.parse("cuda:1") == Device(DeviceKind.CUDA, 1) and str(Device.parse("cuda:1")) == "cuda:1"
    assert Device.parse("auto").kind is DeviceKind.AUTO and Device.parse("cpu").index is None
    for bad in ("gpu", "cuda:x", "cpu:1", ""):
        with pytest.raises(ConfigError):
            Device.parse(bad)


def _result(valid: bool, op_coverage: float | None = None, lazy: bool = False) -> EvalResult:
    status = Status.CORRECT if valid else Status.INCORRECT
    r = EvalResult(status=status, op_coverage=op_coverage,
                   warnings=["lazy_optimization: most compute in PyTorch"] if lazy else [])
    return r.finalize()


def test_demo_summary_counts_each_kind():
    rows = [("a", "gold", _result(True, 1.0)), ("b", "gold", _result(True, 0.8)),
            ("a", "broken_syntax", _result(False)), ("b", "broken_shape", _result(True)),
            ("a", "lazy_torch", _result(True, 0.3, lazy=True)), ("a", "slow_loop", _result(True, 1.0))]
    # gold coverage: (1.0 + 0.8) / 2 = 90 %; one of two broken ones is caught
    assert demo_summary(rows) == ("summary: 2/2 gold correct, 1/2 broken caught, 1/1 lazy flagged, "
                                  "1/1 slow valid, gold coverage 90% (mean)")


def test_train_summary_says_ranks_and_labels_its_metrics():
    history = [{"step": 1, "reward/mean": 0.5}, {"step": 2, "reward/mean": 0.75, "loss/loss": -71.05}]
    lines = summary(history, "runs/x", 2, nproc=2)
    assert lines[0].startswith("done: 2 steps run on 2 data-parallel ranks, output in runs/x")
    assert "mean turn reward" in lines[2] and "0.750" in lines[2] and "policy loss" in lines[3]
    assert summary([], "runs/x", 2, nproc=1)[0].startswith("nothing to do: runs/x already holds 2 steps")
