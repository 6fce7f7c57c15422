"""Fixtures of the service tests: a real server subprocess with directive-driven CPU workers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from drkernel.problems.problem import Problem  # noqa: E402
from server import ServerProcess  # noqa: E402

TOKEN = "t0k3n"
DIRECTIVE = "evaluators:DirectiveEvaluator"

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


@pytest.fixture(scope="session")
def small_problem() -> Problem:
    return Problem(name="double", level=1, code=SMALL_REFERENCE, problem_id="double", source="test")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for a test module: 2 CPU workers running the directive evaluator, auth on."""
    tmp = tmp_path_factory.mktemp("service")
    srv = ServerProcess(tmp / "jobs.sqlite", "--devices", "cpu:2", "--evaluator", DIRECTIVE, "--token", TOKEN,
                        "--lease-s", "3", "--max-body-bytes", "200000", "--max-batch", "50")
    srv.start()
    yield srv
    srv.stop()
