"""Turns on one GPU for organism runs that share it from separate processes (`drkernel.organism.parallel`).

Each run judges its programs with its own gym, and the gym keeps timed regions exclusive only within
its own process. So that no timing ever overlaps another run's work on the device, runs take turns
through two ``flock`` files: a run holds the device *shared* while it samples and trains (many at
once: small kernels), and *exclusive* while its gym judges new programs (one run at a time, nothing
else on the device). A run waiting for its exclusive turn holds a gate that new shared holders must
pass, so a stream of short shared turns cannot starve it; it releases its own shared hold before
queueing at the gate, so no run ever waits while holding what another waits for. Locks held through
``flock`` are dropped by the kernel when a process dies, so a killed run leaves no stale lock.

Outside the turns: each gym's own start-up in the background (its judge and warm candidate creating
their CUDA contexts when a run starts). A run's first evaluations may overlap another's start; the
steady state, where the verdicts are measured, does not.
"""

from __future__ import annotations

import fcntl
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


class DeviceTurns:
    """Shared turns for sampling and training, exclusive turns for the gym (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._main: IO[str] = path.open("a")
        self._gate: IO[str] = path.with_name(path.name + ".gate").open("a")
        self._shared = False

    def _through_gate(self, mode: int) -> None:
        fcntl.flock(self._gate, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._main, mode)
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the device with other runs (sampling, training)."""
        self._through_gate(fcntl.LOCK_SH)
        self._shared = True
        try:
            yield
        finally:
            self._shared = False
            fcntl.flock(self._main, fcntl.LOCK_UN)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the device alone (the gym's evaluations); a shared hold of this run is given up while
        waiting and taken again after."""
        was_shared = self._shared
        fcntl.flock(self._main, fcntl.LOCK_UN)
        self._shared = False
        self._through_gate(fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._main, fcntl.LOCK_UN)
            if was_shared:
                self._through_gate(fcntl.LOCK_SH)
                self._shared = True

    def close(self) -> None:
        self._main.close()
        self._gate.close()
