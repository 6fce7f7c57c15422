"""Gym test fixtures: one CPU evaluator (judge + warm candidate pool) shared by the session."""

from __future__ import annotations

import pytest

from drkernel.gym import InProcessEvaluator


@pytest.fixture(scope="session")
def evaluator():
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2) as ev:
        yield ev
