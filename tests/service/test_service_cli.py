"""`drkernel gym submit` and `drkernel gym status` against a running server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from service_server import SMALL_REFERENCE, SRC, TOKEN


def _drkernel(*args: str, token: str | None = TOKEN) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    env.pop("KERNELGYM_TOKEN", None)
    if token:
        env["KERNELGYM_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "drkernel", "gym", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_submit_waits_and_prints_results(server, tmp_path):
    ref = tmp_path / "double.py"
    ref.write_text(SMALL_REFERENCE)
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("class ModelNew: pass\n# cli good")
    bad.write_text("class ModelNew: pass\n# status: incorrect\n# cli bad")
    out = _drkernel("submit", str(ref), str(good), "--url", server.url)
    assert out.returncode == 0 and out.stdout, (out.stdout, out.stderr)
    line = json.loads(out.stdout)
    assert line["status"] == "done" and line["result"]["status"] == "correct"
    assert line["result"]["request_id"] == "good.py"  # the name, never the local path
    out = _drkernel("submit", str(ref), str(good), str(bad), "--url", server.url)
    assert out.returncode == 1  # one of them is not valid
    assert [json.loads(x)["result"]["status"] for x in out.stdout.splitlines()] == ["correct", "incorrect"]
    ids = _drkernel("submit", str(ref), str(good), "--url", server.url, "--no-wait")
    job_id = json.loads(ids.stdout)["id"]
    status = _drkernel("status", job_id, "--url", server.url, "--json")
    assert json.loads(status.stdout)["id"] == job_id and status.returncode == 0


def test_status_and_errors(server, tmp_path):
    out = _drkernel("status", "--url", server.url, "--json")
    assert out.returncode == 0
    assert json.loads(out.stdout)["health"]["workers_total"] == 2
    assert "workers" in _drkernel("status", "--url", server.url).stdout
    denied = _drkernel("status", "--url", server.url, token=None)
    assert denied.returncode == 3 and "401" in denied.stderr
    missing = _drkernel("submit", str(tmp_path / "nope.py"), str(tmp_path / "x.py"), "--url", server.url)
    assert missing.returncode == 2
    bad_config = _drkernel("serve", "--sqlite-synchronous", "SOMETIMES")
    assert bad_config.returncode == 2 and "sqlite_synchronous" in bad_config.stderr
