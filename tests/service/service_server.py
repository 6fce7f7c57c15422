"""A real KernelGym server in a subprocess (`python -m drkernel gym serve`), for tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def http_client(srv: "ServerProcess", token: str | None = None, source: str | None = None) -> httpx.Client:
    """A client of ``srv``, with ``token`` as its bearer and ``source`` as its local address (another
    loopback address is another peer to the server's limits)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = httpx.HTTPTransport(local_address=source) if source else None
    return httpx.Client(base_url=srv.url, headers=headers, timeout=60, transport=transport)


def until(predicate, what: str, deadline_s: float = 60.0, poll_s: float = 0.1) -> None:
    """Poll ``predicate`` until it holds; fail naming ``what`` after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while not predicate():
        assert time.monotonic() < deadline, f"not reached: {what}"
        time.sleep(poll_s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """``python -m drkernel gym serve`` on a free port; ``start()`` waits until /v1/health answers.

    Unless ``args`` name them, the server gets ``--token TOKEN`` (client ``default``) and
    ``--allow-custom-problems`` (the tests' problems are not among the loaded sets); ``start()``
    also puts the token in ``KERNELGYM_TOKEN``, which clients built without one read.
    ``single_user``: no token at all (the server generates one for client ``local``)."""

    def __init__(
        self, db: Path, *args: str, port: int | None = None, log: Path | None = None, custom: bool = True,
        env: dict[str, str] | None = None, single_user: bool = False,
    ):
        args = list(args)
        if "--token" not in args and not single_user:
            args += ["--token", TOKEN]
        if custom and "--allow-custom-problems" not in args:
            args.append("--allow-custom-problems")
        self.token = None if single_user else args[args.index("--token") + 1]
        self.db, self.args = db, args
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or db.with_suffix(".log")
        self.env = env or {}  # on top of ours (PYTHONPATH is always set here)
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 120.0, workers: int = 1) -> "ServerProcess":
        """Start the server; return once ``workers`` device workers serve."""
        env = {
            **os.environ,
            **self.env,
            "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        env.pop("KERNELGYM_TOKEN", None)  # the server's token is in its arguments, or none at all
        cmd = [
            sys.executable,
            "-m",
            "drkernel",
            "gym",
            "serve",
            "--port",
            str(self.port),
            "--db",
            str(self.db),
            "--log-level",
            "warning",
            *self.args,
        ]
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT, start_new_session=True
        )
        if self.token is not None:
            os.environ["KERNELGYM_TOKEN"] = self.token
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{self.url}/v1/health", timeout=1.0).json()["workers_ready"] >= workers:
                    return self
            except (httpx.HTTPError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{workers} worker(s) not ready in {timeout_s} s: {self.log.read_text()[-3000:]}")

    def kill9(self) -> None:
        """kill -9 the server process alone (its workers die with it: `workers.die_with_parent`)."""
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        """Stop the server gracefully, then make sure nothing of its session is left."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


TOKEN = "t0k3n-of-the-tests"
DIRECTIVE = "service_evaluators:DirectiveEvaluator"

SMALL_REFERENCE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(64)]

def get_init_inputs():
    return []
"""
