"""Fixtures: the tiny locally built model (built once per session) and a real model server."""

from __future__ import annotations

import socket
import threading
import time

import pytest


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the tiny Llama built on the fly."""
    from drkernel.agent.tiny import build_tiny

    return build_tiny(seed=0)


@pytest.fixture(scope="session")
def model_server(tiny):
    """Our OpenAI-compatible server for the tiny model, on a free local port; yields its base URL."""
    import uvicorn

    from drkernel.agent.policies.hf_local import HFLocalPolicy
    from drkernel.agent.server import create_app

    model, tokenizer = tiny
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(HFLocalPolicy(model, tokenizer, batch_size=8, name="tiny"), "tiny")
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        if time.time() > deadline:
            raise RuntimeError("model server did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
