"""An evaluation cancelled while it waits (for a candidate place, device memory or the device's lock)
stops there: the service stops a job past its deadline alone, even one that never got to run, instead
of killing the worker with every other job on it. Each wait leaves nothing behind."""

from __future__ import annotations

import threading

import pytest

from drkernel.gym.orchestrator.runtime import MemoryBudget, RWLock, Slots, WaitCancelled, cancellable_waits


def _cancelled_wait(wait) -> BaseException | None:
    """Run ``wait`` in a thread whose evaluation is cancelled once it waits; what it raised."""
    flag, raised, started = [False], [], threading.Event()

    def run() -> None:
        with cancellable_waits(lambda: flag[0]):
            started.set()
            try:
                wait()
            except BaseException as e:  # noqa: BLE001 - the test reads it
                raised.append(e)

    t = threading.Thread(target=run)
    t.start()
    started.wait(10)
    flag[0] = True
    t.join(timeout=30)
    assert not t.is_alive()
    return raised[0] if raised else None


def test_a_wait_for_a_candidate_place_ends_when_cancelled():
    slots = Slots(1)

    def take() -> None:
        with slots.held():
            pytest.fail("got a place another evaluation holds")

    with slots.held():
        assert isinstance(_cancelled_wait(take), WaitCancelled)
    with slots.held():  # the cancelled wait took nothing
        pass


def test_a_wait_for_device_memory_ends_when_cancelled_and_leaves_the_queue():
    budget = MemoryBudget(100)

    def claim() -> None:
        with budget.claim(50):
            pytest.fail("claimed memory another evaluation holds")

    with budget.claim(100):
        assert isinstance(_cancelled_wait(claim), WaitCancelled)
    with budget.claim(50):  # first in line now: the cancelled ticket is gone
        assert budget.used == 50


def test_a_wait_for_the_device_lock_ends_when_cancelled():
    rw = RWLock()
    rw.acquire_exclusive()  # a timed region holds the device
    try:
        assert isinstance(_cancelled_wait(rw.join), WaitCancelled)
    finally:
        rw.release_exclusive()
    rw.join()  # no hold or membership was left by the cancelled wait
    rw.leave()
    rw.acquire_exclusive(drain=True)
    rw.release_exclusive()


def test_a_paused_member_lets_a_region_run_and_a_drain_still_waits_for_it():
    """``yield_at_exports``: a session waiting on the judge gives up its shared hold (a timed region runs
    meanwhile) but stays a member (the reference's timing, a drain, still waits for it to end)."""
    rw = RWLock()
    rw.join()
    rw.pause()
    region = threading.Thread(target=lambda: (rw.acquire_exclusive(), rw.release_exclusive()))
    region.start()
    region.join(timeout=30)
    assert not region.is_alive()  # not blocked by the paused member
    drained = threading.Event()
    drain = threading.Thread(target=lambda: (rw.acquire_exclusive(drain=True), drained.set(), rw.release_exclusive()))
    drain.start()
    rw.resume()
    assert not drained.is_set()  # the member is still in flight
    rw.leave()
    drain.join(timeout=30)
    assert drained.is_set()
