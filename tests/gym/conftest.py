"""Gym test fixtures: one CPU evaluator (judge + warm candidate pool) shared by the session."""

from __future__ import annotations

import pytest

from drkernel.gym import InProcessEvaluator
from drkernel.gym.checks import core_checks


@pytest.fixture(scope="session")
def evaluator():
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2) as ev:
        yield ev


@pytest.fixture(scope="session")
def boundary_only_evaluator():
    """Only the trust boundary's own checks: what isolation alone guarantees, without the static
    and audit-hook guards that stop such solutions earlier by default."""
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, checks=core_checks()) as ev:
        yield ev
