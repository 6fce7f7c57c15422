"""`drkernel demo` as a person reads it: in a log (not a terminal), in results.md, in the hacks column.

One real run of the built-in gelu's solutions (gold, lazy, broken) on CPU under the interpreter.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from drkernel.cli import app
from drkernel.cli.gym import clip, hack_names, markdown_table
from drkernel.gym import EvalResult, Status
from drkernel.gym.result import Hack, KernelStat

PASSTHROUGH = Hack(code=7, name="pytorch_passthrough", evidence="most rows in torch", message="m",
                   strict_only=True)
DECOY = Hack(code=3, name="decoy_kernel", evidence="launched, output unused", message="m")


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    args = ["demo", "--out", str(out), "--device", "cpu", "--level", "1", "--limit", "1"]
    res = CliRunner().invoke(app, args)
    return res, out


def test_a_log_gets_one_line_per_solution_and_an_unwrapped_table(demo_run):
    res, _ = demo_run
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert any(ln.startswith("[3/3] builtin/L1/gelu ") for ln in lines)  # progress as lines, not a bar
    (gold,) = [ln for ln in lines if ln.startswith("| builtin/L1/gelu | gold |")]  # one row, one line
    assert "| correct | yes |" in gold and "gelu_kernel x1" in gold  # the kernel name keeps its space
    assert not any(ch in res.output for ch in "┏┃━")  # no box drawing folded at 80 columns


def test_a_valid_lazy_solution_shows_no_hack(demo_run):
    _, out = demo_run
    saved = json.loads((out / "results.json").read_text())
    rows = {r["solution"]: EvalResult.from_dict(r["result"]) for r in saved}
    lazy = rows["lazy_torch_most_rows"]
    assert lazy.valid and [h.name for h in lazy.hacks] == ["pytorch_passthrough"]  # strict only
    (line,) = [ln for ln in (out / "results.md").read_text().splitlines() if "lazy_torch_most_rows" in ln]
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[8] == "-" and cells[9] == "pytorch_passthrough"  # hacks, strict-only flags


def test_hack_columns_follow_the_verdict_mode():
    lenient = EvalResult(status=Status.CORRECT, hacks=[PASSTHROUGH, DECOY]).finalize()
    assert hack_names(lenient) == ("decoy_kernel", "pytorch_passthrough") and not lenient.valid
    strict = EvalResult(status=Status.CORRECT, hacks=[PASSTHROUGH], verdict_mode="strict").finalize()
    assert hack_names(strict) == ("pytorch_passthrough", "-") and not strict.valid  # strict counts it


def test_long_errors_are_cut_with_an_ellipsis():
    r = EvalResult(status=Status.INCORRECT, error="x" * 300,
                   kernels=[KernelStat(name="k", own=True, launches=2)]).finalize()
    cells = markdown_table([("p", "s", r)], error_chars=40).splitlines()[2].split(" | ")
    assert cells[-1] == "x" * 39 + "\u2026 |" and cells[7] == "k x2"
    assert clip("short", 40) == "short" and len(clip("y" * 41, 40)) == 40
