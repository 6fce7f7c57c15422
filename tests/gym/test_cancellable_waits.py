"""An evaluation cancelled while it waits (for a candidate place, device memory or the device's lock)
stops there: the service stops a job past its deadline alone, even one that never got to run, instead
of killing the worker with every other job on it. Each wait leaves nothing behind."""

from __future__ import annotations

import threading

import pytest

from drkernel.gym.orchestrator.runtime import MemoryBudget, RWLock, Slots, WaitCancelled, cancellable_waits
from drkernel.organism.turns import DeviceTurns


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


def _finishes(fn) -> None:
    """``fn`` returns (in a thread, within a bound): nothing it waits for was left held."""
    t = threading.Thread(target=fn)
    t.start()
    t.join(timeout=30)
    assert not t.is_alive()


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


def test_a_wait_for_a_timed_region_ends_when_cancelled_with_the_member_back_on_its_shared_hold():
    rw = RWLock()
    rw.acquire_shared()  # another holder the region waits for (a judge request, say)
    rw.join()
    assert isinstance(_cancelled_wait(rw.enter_region), WaitCancelled)
    assert rw.writers_waiting == 0 and not rw.contended  # the cancelled region is no longer counted
    rw.release_shared()
    # the member's shared hold is back: a region still waits for it (and is cancelled here in turn)
    assert isinstance(_cancelled_wait(rw.acquire_exclusive), WaitCancelled)
    rw.leave()
    _finishes(lambda: (rw.acquire_exclusive(drain=True), rw.release_exclusive()))  # nothing left held


def test_a_cancelled_batched_region_no_longer_holds_new_sessions_back():
    """A due batch of regions blocks new sessions; its one region cancelled, they join again."""
    parked = []
    rw = RWLock(batch=(1, 3600.0), park=lambda: parked.append(1))
    rw.join()
    rw.acquire_shared()
    assert isinstance(_cancelled_wait(rw.enter_region), WaitCancelled) and parked == [1]
    rw.release_shared()
    _finishes(lambda: (rw.join(), rw.leave()))  # not held back by a batch that no longer waits
    rw.enter_region()  # the cancelled member's shared hold is still its own: its region can run
    rw.leave(exclusive=True)
    _finishes(lambda: (rw.acquire_exclusive(drain=True), rw.release_exclusive()))


def test_a_drain_waiting_for_members_ends_when_cancelled_and_lets_sessions_join():
    rw = RWLock()
    rw.join()  # a candidate in flight: a drain waits for it to leave
    assert isinstance(_cancelled_wait(lambda: rw.acquire_exclusive(drain=True)), WaitCancelled)
    _finishes(lambda: (rw.join(), rw.leave()))  # no drain is counted as waiting any more
    rw.leave()
    _finishes(lambda: (rw.acquire_exclusive(drain=True), rw.release_exclusive()))


def test_a_region_waiting_for_another_processs_turn_ends_when_cancelled(tmp_path):
    """With the other processes' lock (`OuterLock`: here two runs' real `DeviceTurns` on one lock file),
    a region whose own lock was granted but whose exclusive turn waits for another run's shared turn
    stops when cancelled: the own hold goes back, the run keeps its shared turn, and the region runs
    once the other run has left the device."""
    other, ours = DeviceTurns(tmp_path / "device.lock"), DeviceTurns(tmp_path / "device.lock")
    rw = RWLock(outer=ours)
    try:
        with ours.shared():
            with other.shared():  # another run samples on the device: a region waits for it to leave
                rw.join()
                assert isinstance(_cancelled_wait(rw.enter_region), WaitCancelled)
                assert not rw.contended and ours.stats.exclusive_turns == 0
            rw.enter_region()
            assert ours.stats.exclusive_turns == 1
            rw.leave_region()
            rw.leave()
            assert not other.acquire_exclusive(lambda: True)  # our run's shared turn is held again
        assert other.acquire_exclusive(lambda: True)  # and given back at the end
        other.release_exclusive()
    finally:
        other.close()
        ours.close()
