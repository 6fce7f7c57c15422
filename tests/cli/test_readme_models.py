"""The README's "Evaluate a model on KernelBench" block, run line by line against our own
OpenAI-compatible server (`drkernel agent serve-model`) and a local Hugging Face folder, on CPU.

The block is parsed from README.md, so what runs is what a reader copies. The server line (ending in
``&``) is started on a free port, waited for on ``/health`` and stopped at the end; each other line
must exit 0 and leave the run folder its text promises.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### Evaluate a model on KernelBench"


def block_lines(readme: str) -> list[str]:
    """The commands of the first ``bash`` block under the heading, comments dropped."""
    section = readme.split(HEADING, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"README.md: no ```bash block under {HEADING}"
    return [ln.partition(" #")[0].strip() for ln in block.group(1).splitlines() if ln.strip()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(proc: subprocess.Popen, port: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                return
        except OSError:
            time.sleep(1)  # polling a starting server; the outcome does not depend on this interval
    raise AssertionError(f"no answer on port {port} within {timeout_s} s")


def test_the_block_names_both_policies():
    lines = block_lines((ROOT / "README.md").read_text())
    runs = [ln for ln in lines if ln.startswith("drkernel bench run")]
    assert any("--policy openai:" in ln for ln in runs) and any("--policy hf:" in ln for ln in runs)
    assert sum(ln.endswith("&") for ln in lines) == 1


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_line_runs_against_our_server(tmp_path):
    lines = block_lines((ROOT / "README.md").read_text())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    port = _free_port()
    server = None
    try:
        for line in lines:
            old = re.search(r"--port (\d+)", line) or re.search(r"127\.0\.0\.1:(\d+)", line)
            command = line.replace(old[1], str(port)) if old else line
            if command.endswith("&"):
                server = subprocess.Popen(["bash", "-c", f"exec {command[:-1]}"], cwd=tmp_path, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                _wait_healthy(server, port)
                continue
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=900)
            assert done.returncode == 0, f"`{command}`:\n{done.stdout}\n{done.stderr}"
            out = re.search(r"--out (\S+)", command)
            if out and command.startswith("drkernel bench run"):
                run = tmp_path / out[1]
                rows = (run / "trajectories.jsonl").read_text().splitlines()
                metrics = json.loads((run / "metrics.json").read_text())
                assert len(rows) == 2 and metrics["samples"] == 2 and (run / "report.md").exists()
                assert "Fast@0" in done.stdout
    finally:
        if server is not None:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=60)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
