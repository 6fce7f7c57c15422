"""Turns on one GPU for organism runs that share it from separate processes (`drkernel.organism.parallel`).

Each run judges its programs with its own gym, and the gym keeps timed regions exclusive only within
its own process. So that no timing ever overlaps another run's work on the device, runs take turns
through two ``flock`` files. A run holds the device *shared* for everything it does on it: sampling,
training, and its gym's compiling, correctness and integrity runs (many runs at once). Its gym's timed
regions and reference timings hold it *exclusive*: the gym calls `acquire_exclusive` /
`release_exclusive` around each one (`drkernel.gym.orchestrator.runtime.OuterLock`, passed as the
evaluator's ``device_lock``), after its own exclusive hold, when nothing else of this process is on the
device; the run's shared hold is given up for the region and taken again after it. So a region waits
for every other run to leave the device, and all the other work of the runs overlaps.

A run waiting for an exclusive turn holds a gate that new shared holders must pass, so a stream of
short shared turns cannot starve it; it releases its own shared hold before queueing at the gate, so no
run ever waits while holding what another waits for (a run that must wait for another run for any other
reason gives its hold up first: `released`). Locks held through ``flock`` are dropped by the kernel
when a process dies, so a killed run leaves no stale lock.

One thread of a process uses its turns at a time: the run's own thread outside its gym's batches, the
gym's region thread inside them (the gym's lock makes its regions one at a time, and the run's thread
waits for the batch). Outside the turns: each gym's start-up in the background (its judge and warm
candidate creating their CUDA contexts when a run starts).
"""

from __future__ import annotations

import fcntl
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Callable, Iterator

TURN_POLL_S = 0.05
"""How often a cancellable wait for an exclusive turn tries the lock (flock has no timed wait)."""


@dataclass
class TurnStats:
    """Seconds this process spent waiting for and holding its turns (the run's JSON reports them)."""

    shared_wait_s: float = 0.0
    exclusive_wait_s: float = 0.0
    exclusive_hold_s: float = 0.0
    exclusive_turns: int = 0

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


class DeviceTurns:
    """Shared turns for a run's device work, exclusive turns for its gym's timed regions (see the module
    docstring)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._main: IO[str] = path.open("a")
        self._gate: IO[str] = path.with_name(path.name + ".gate").open("a")
        self._shared = 0      # nested shared holds of this process
        self._exclusive = False
        self._since = 0.0
        self.stats = TurnStats()

    def _through_gate(self, mode: int, cancelled: Callable[[], bool] | None = None) -> float | None:
        """Take the main lock in ``mode`` behind the gate; returns the seconds it waited (None, holding
        neither, once ``cancelled()`` while it waited)."""
        t = time.monotonic()
        if not _flock(self._gate, fcntl.LOCK_EX, cancelled):
            return None
        try:
            if not _flock(self._main, mode, cancelled):
                return None
        finally:
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        return time.monotonic() - t

    def _take_shared(self) -> None:
        self.stats.shared_wait_s += self._through_gate(fcntl.LOCK_SH)

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the device with other runs (sampling, training, a gym's batch); holds nest."""
        if not self._shared and not self._exclusive:
            self._take_shared()
        self._shared += 1
        try:
            yield
        finally:
            self._shared -= 1
            if not self._shared and not self._exclusive:
                fcntl.flock(self._main, fcntl.LOCK_UN)

    @contextmanager
    def released(self) -> Iterator[None]:
        """Give this process's shared hold up while it waits for another run (taken again after)."""
        held = self._shared > 0 and not self._exclusive
        if held:
            fcntl.flock(self._main, fcntl.LOCK_UN)
        try:
            yield
        finally:
            if held:
                self._take_shared()

    def acquire_exclusive(self, cancelled: Callable[[], bool] | None = None) -> bool:
        """Hold the device alone (a gym's timed region); this process's shared hold is given up first.
        False once ``cancelled()`` while it waited (the gym's evaluation was stopped): the shared hold is
        taken again, if it had one."""
        fcntl.flock(self._main, fcntl.LOCK_UN)
        waited = self._through_gate(fcntl.LOCK_EX, cancelled)
        if waited is None:
            if self._shared:
                self._take_shared()
            return False
        self.stats.exclusive_wait_s += waited
        self._exclusive, self._since = True, time.monotonic()
        self.stats.exclusive_turns += 1
        return True

    def release_exclusive(self) -> None:
        """The region is over: back to this process's shared hold, if it had one."""
        if not self._exclusive:
            return
        fcntl.flock(self._main, fcntl.LOCK_UN)
        self._exclusive = False
        self.stats.exclusive_hold_s += time.monotonic() - self._since
        if self._shared:
            self._take_shared()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        self.acquire_exclusive()
        try:
            yield
        finally:
            self.release_exclusive()

    def close(self) -> None:
        self._main.close()
        self._gate.close()


def _flock(f: IO[str], mode: int, cancelled: Callable[[], bool] | None) -> bool:
    """Lock ``f`` in ``mode``: blocking without ``cancelled``, else tried every `TURN_POLL_S` until it is
    held (True) or ``cancelled()`` (False)."""
    if cancelled is None:
        fcntl.flock(f, mode)
        return True
    while True:
        try:
            fcntl.flock(f, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if cancelled():
                return False
            time.sleep(TURN_POLL_S)
