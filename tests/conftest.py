"""Shared test fixtures. Paths to the project's shipped data."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _shared_data() -> Path:
    for cand in (REPO / "tests" / "data" / "kernelbench_level1_level2.jsonl",
                 REPO.parent / "shared" / "data" / "kernelbench_level1_level2.jsonl"):
        if cand.exists():
            return cand
    raise FileNotFoundError("kernelbench_level1_level2.jsonl not found")


@pytest.fixture(scope="session")
def kernelbench_rows() -> Path:
    """The real KernelBench level-1/2 problems (200 rows) shipped with the tests."""
    return _shared_data()


@pytest.fixture(autouse=True, scope="session")
def _state_of_our_own(tmp_path_factory):
    """The service's default store and token live under ``$XDG_STATE_HOME``; the tests get a folder of
    their own, so what an earlier run (or the user) left in ``~/.local/state`` changes nothing here."""
    import os

    old = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if old is None:
        os.environ.pop("XDG_STATE_HOME", None)
    else:
        os.environ["XDG_STATE_HOME"] = old
