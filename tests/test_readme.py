"""The README's Quick start, run line by line in order, on CPU, as a newcomer would from a fresh clone.

The block is parsed from README.md, so a changed line is what runs; each line must exit 0, and where
its comment promises something (a count, a folder, plots) the test checks that it happened. Lines run
with ``bash`` in a scratch folder that links to every top-level entry of the repository except the
outputs (``runs/``, ``demo_results*``), so earlier runs cannot make a line pass or do nothing.

Two lines cannot run literally everywhere, and the test says how it treats them:
  - ``make setup`` / ``. .venv/bin/activate``: run for real when the interpreter running the tests is
    the repository's own ``.venv`` (CI, after ``make test``); ``make setup`` then has nothing to do, and
    it runs in the repository, not the scratch folder, so an install it does keeps the venv's paths.
    From another virtualenv (a developer's shared one) installing into it would be wrong, so the test
    runs ``make -n setup`` (the recipe parses, the target exists) and activates the running venv.
  - ``drkernel gym serve``: runs until stopped, so it is started, asked ``GET /v1/health`` until it
    answers, and stopped. The README's port is used when free, another free port otherwise.

Slow (several minutes on 2 cores): ``make test-readme``; CI (``.ci/run``) runs it after ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINE_TIMEOUT_S = 1200
OUTPUTS = ("runs", "kernelgym.sqlite")


@dataclass(frozen=True)
class Step:
    """One Quick start line: the command and the comment after it."""

    command: str
    comment: str


def quick_start(readme: str) -> list[Step]:
    """The lines of the first ``bash`` block under ``## Quick start``."""
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README.md: no ```bash block under ## Quick start"
    steps = []
    for line in block.group(1).splitlines():
        command, _, comment = line.partition(" #")
        if command.strip():
            steps.append(Step(command.strip(), comment.strip()))
    return steps


def test_quick_start_parses_every_line():
    steps = quick_start((ROOT / "README.md").read_text())
    assert steps[0].command == "make setup" and steps[1].command == ". .venv/bin/activate"
    assert all(s.command.startswith(("make ", ". ", "drkernel ")) for s in steps), steps


@dataclass
class Shell:
    """Runs lines in the scratch folder with the venv's ``bin`` first on PATH."""

    cwd: Path
    venv: Path
    in_repo_venv: bool

    @property
    def env(self) -> dict[str, str]:
        # The service keeps its store and token under $XDG_STATE_HOME: a state of its own in the scratch
        # folder, so a client added by an earlier run on this machine cannot make `token add` fail.
        env = dict(os.environ, VIRTUAL_ENV=str(self.venv), PYTHONUNBUFFERED="1",
                   XDG_STATE_HOME=str(self.cwd / ".state"))
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, command: str) -> subprocess.CompletedProcess:
        done = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env, capture_output=True,
                              text=True, timeout=LINE_TIMEOUT_S)
        assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
        return done


def _free_port(preferred: int) -> int:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", preferred))
            return preferred
        except OSError:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]


def serve_until_healthy(shell: Shell, step: Step) -> str:
    """Start a serving line, wait for ``/v1/health`` to answer, stop it; returns the health reply."""
    port = int(re.search(r"--port (\d+)", step.command).group(1))
    free = _free_port(port)
    command = step.command.replace(f"--port {port}", f"--port {free}")
    proc = subprocess.Popen(["bash", "-c", f"exec {command}"], cwd=shell.cwd, env=shell.env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"`{command}` exited {proc.returncode}:\n{proc.stdout.read()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{free}/v1/health", timeout=5) as reply:
                    return reply.read().decode()
            except OSError:
                time.sleep(1)
        raise AssertionError(f"`{command}`: no answer on /v1/health within 300 s")
    finally:
        proc.send_signal(signal.SIGINT)  # what Ctrl-C does
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _setup(shell: Shell, step: Step) -> None:
    if shell.in_repo_venv:
        # in the repository itself: an install run from the scratch folder would write the scratch
        # paths into the venv's scripts (their #! line), and the venv would break once it is gone
        Shell(cwd=ROOT, venv=shell.venv, in_repo_venv=True).run(step.command)
    else:
        out = shell.run("make -n setup").stdout
        assert "pip install" in out or "Nothing to be done" in out or not out.strip(), out


def _activate(shell: Shell, step: Step) -> None:
    shell.run(step.command if shell.in_repo_venv else f". {shlex.quote(str(shell.venv / 'bin/activate'))}")


def _counts(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    """``(41 problems, 81 solutions)`` in the comment must be what the suite holds."""
    from drkernel.problems import load_builtin

    problems = load_builtin()
    solutions = sum(len(p.metadata.get("solutions", {})) for p in problems)
    promised = re.search(r"\((\d+) problems, (\d+) solutions\)", step.comment)
    assert promised and (int(promised[1]), int(promised[2])) == (len(problems), solutions), step.comment
    assert f"{len(problems)} problems" in done.stdout


def _out_dir(step: Step, default: str) -> str:
    found = re.search(r"--out (\S+)", step.command)
    return found[1] if found else default


def _bench(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    out = cwd / _out_dir(step, "")
    rows = (out / "trajectories.jsonl").read_text().splitlines()
    assert len(rows) > 0 and json.loads((out / "metrics.json").read_text())["samples"] == len(rows)


def _report(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    run_dir = cwd / step.command.split()[-1]
    report = (run_dir / "report.md").read_text()
    for plot in ("fast_by_turn.png", "outcomes.png"):
        assert plot in report and (run_dir / plot).exists(), plot
    timed = json.loads((run_dir / "metrics.json").read_text())["timed"]
    assert ("speedups.png" in report) == timed  # the README promises the histogram only when timed


def _train(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    text = " ".join((done.stdout + done.stderr).split())
    assert "done: 2 steps run" in text, text  # not "nothing to do": each line trains
    if "--out" in step.command:
        assert (cwd / _out_dir(step, "") / "metrics.jsonl").exists()


def _sft(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    text = " ".join((done.stdout + done.stderr).split())
    assert re.search(r"trained [1-9]\d* steps on [1-9]\d* trajectories", text), text


def _eval(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    assert "static checks" in done.stderr and "running the solution" in done.stderr  # its stages
    assert "correct" in done.stdout


def _version(done: subprocess.CompletedProcess, step: Step, cwd: Path) -> None:
    assert done.stdout.startswith("drkernel ")


Check = Callable[[subprocess.CompletedProcess, Step, Path], None]
# What a line's comment promises, by its command; a line with no entry must still exit 0.
CHECKS: list[tuple[Callable[[str], bool], Check]] = [
    (lambda c: c == "drkernel --version", _version),
    (lambda c: c == "drkernel problems list", _counts),
    (lambda c: c.startswith("drkernel gym eval"), _eval),
    (lambda c: c.startswith("drkernel bench run"), _bench),
    (lambda c: c.startswith("drkernel bench report"), _report),
    (lambda c: c.startswith("drkernel train"), _train),
    (lambda c: c.startswith("drkernel sft"), _sft),
]


def _check_for(step: Step) -> Check | None:
    return next((check for matches, check in CHECKS if matches(step.command)), None)


@pytest.fixture
def scratch(tmp_path) -> Path:
    """A folder that looks like a fresh clone: links to the repository's entries, no outputs."""
    for entry in ROOT.iterdir():
        if entry.name not in OUTPUTS and not entry.name.startswith("demo_results"):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


@pytest.mark.slow
@pytest.mark.timeout(3 * LINE_TIMEOUT_S)  # the whole block: well past pyproject's 600 s per test
def test_every_quick_start_line_works_in_order(scratch):
    venv = Path(sys.prefix)
    shell = Shell(cwd=scratch, venv=venv, in_repo_venv=venv.resolve() == (ROOT / ".venv").resolve())
    ran = []
    for step in quick_start((ROOT / "README.md").read_text()):
        t0 = time.monotonic()
        if step.command == "make setup":
            _setup(shell, step)
        elif step.command.startswith(". "):
            _activate(shell, step)
        elif " serve" in step.command:
            health = json.loads(serve_until_healthy(shell, step))
            assert health["status"] in ("ok", "degraded", "down") and health["workers_total"] >= 1, health
        else:
            done = shell.run(step.command)
            check = _check_for(step)
            if check is not None:
                check(done, step, scratch)
        ran.append(f"{time.monotonic() - t0:7.1f}s  {step.command}")
    print("\n".join(ran))  # shown with -s or on failure: the cost of each line
