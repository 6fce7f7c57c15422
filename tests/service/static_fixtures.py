"""Static checks for `test_static_child.py`, importable in a checker child (by its module path)."""

from __future__ import annotations

import threading

from drkernel.gym.result import Hack


class NeverEnds:
    """A static check that never finishes (it stands for a source that costs more than its deadline)."""

    name = "never_ends"
    blocking = True

    def check(self, source: str, problem) -> list[Hack]:
        threading.Event().wait()
        return []


class Raises:
    name = "raises"
    blocking = False

    def check(self, source: str, problem) -> list[Hack]:
        raise ValueError("our check's own bug")
