"""How a candidate's job reaches a device's judges: sticky (one judge for the whole job) or shared.

A judge answers one request at a time (`runtime.JudgeSlot`'s lock). With ``sticky`` routing a job's
every export waits for the one judge it was given, even while another judge is idle: in an H100 run
(2026-11-26, 8 slots, 2 judges) the exports waited 183 s on the judges that were busy 91 s, each
judge idle more than half the time. With ``shared`` routing (`SharedJudge`) each request goes to the
judge the job used last if that one is free, else to any free judge, else to the first that frees.

What a judge keeps between requests is one job's current reference outputs (its ``current`` entry,
keyed by trial and seed); a request for another trial runs the reference again anyway. A request
that moves to another judge runs the same seeded reference there, so the verdict is the same, and
costs one reference run where the judge it left would have reused its outputs. Exports above
`SHARED_MAX_BYTES` stay with the job's judge: the judge it left keeps that job's outputs until the
release, and at full size those are gigabytes of device memory that `MemoryBudget` did not count.
At the job's end the release goes to every judge the job used.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, Sequence

from drkernel.gym.messages import Op
from drkernel.gym.verdict.plausibility import tree_bytes

JUDGE_ROUTINGS = ("sticky", "shared")
"""``sticky``: a job's requests all go to the judge with the fewest jobs at its start. ``shared``: each
request to a free judge, preferring the job's last (`SharedJudge`)."""
SHARED_MAX_BYTES = 256 << 20
"""The largest export (outputs and post-run inputs, from its encoded tree) that may move to another
judge: the judge it leaves keeps the job's reference outputs (about the export's size) until release."""


class Slot(Protocol):
    """What `SharedJudge` needs of a `runtime.JudgeSlot`."""

    index: int
    lock: threading.Lock

    def call_locked(self, header: dict[str, Any], blob: bytes, timeout_s: float, fds: list[int] | None) -> dict:
        ...


class JudgeFreed:
    """A condition every judge notifies when it finishes a request, so a shared request can wait for
    whichever judge frees first."""

    def __init__(self) -> None:
        self.cond = threading.Condition()

    def notify(self) -> None:
        with self.cond:
            self.cond.notify_all()


class SharedJudge:
    """One job's view of the device's judges under ``shared`` routing (it stands where a sticky job
    holds its `JudgeSlot`: ``call`` and ``index``).

    ``home`` is the judge the job was assigned (it counts there for the fewest-jobs choice); ``used``
    records every judge that has seen the job, in order, so the release reaches each."""

    def __init__(self, judges: Sequence[Slot], home: Slot, freed: JudgeFreed,
                 max_bytes: int = SHARED_MAX_BYTES) -> None:
        self.judges = judges
        self.home = home
        self.index = home.index
        self.freed = freed
        self.max_bytes = max_bytes
        self.last: Slot = home
        self.used: list[Slot] = []

    def call(self, header: dict[str, Any], blob: bytes, timeout_s: float, fds: list[int] | None) -> dict:
        if header.get("op") == Op.RELEASE:
            return self._release(header, timeout_s)
        movable = tree_bytes(header.get("tree")) <= self.max_bytes
        slot = self._acquire(movable)
        try:
            if slot not in self.used:
                self.used.append(slot)
            self.last = slot
            return slot.call_locked(header, blob, timeout_s, fds)
        finally:
            slot.lock.release()
            self.freed.notify()

    def _acquire(self, movable: bool) -> Slot:
        """The judge for the next request, its lock held: the last one when it is free (or when the
        request may not move), else a free one, else the first that frees."""
        if not movable:
            self.last.lock.acquire()
            return self.last
        order = [self.last] + [j for j in self.judges if j is not self.last]
        with self.freed.cond:
            while True:
                for slot in order:
                    if slot.lock.acquire(blocking=False):
                        return slot
                self.freed.cond.wait()

    def _release(self, header: dict[str, Any], timeout_s: float) -> dict:
        """The job's end on every judge it used (the home judge's reply, or the last one's)."""
        reply: dict = {"op": Op.RELEASED.value}
        for slot in self.used or [self.home]:
            with slot.lock:
                reply = slot.call_locked(header, b"", timeout_s, None)
            self.freed.notify()
        return reply
