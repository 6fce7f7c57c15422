"""Batched timed regions (`runtime.RWLock(batch=(k, t))`, `InProcessEvaluator(region_batch=)`): waiting
regions block new sessions only once due, the device then drains once for all of them, and a session
parked for its region gives its slot to the next evaluation (`runtime.Slots`)."""

from __future__ import annotations

import threading
import time

import pytest

from drkernel.errors import ConfigError
from drkernel.gym import InProcessEvaluator
from drkernel.gym.orchestrator.runtime import RWLock, Slots
from drkernel.gym.result import Status

from gym_cases import RELU_SOLUTION, request


def until(condition, what: str) -> None:
    """Wait for a state another thread reaches (bounded; the state, not a duration, is what is tested)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.001)


def session(rw: RWLock, name: str, ran: list[str], region: bool, done: threading.Event | None = None):
    """A candidate session as `CandidateSession` holds the lock: joined, its region (or not), left."""

    def body() -> None:
        rw.join()
        if region:
            rw.enter_region()
            ran.append(name)
            rw.leave(exclusive=True)
            return
        ran.append(name)
        if done is not None:
            done.wait(10)
        rw.leave()

    t = threading.Thread(target=body)
    t.start()
    return t


def test_waiting_regions_block_new_sessions_only_once_k_of_them_wait():
    rw = RWLock(batch=(2, 3600.0))
    ran: list[str] = []
    rw.join()  # a session in flight: no region can run yet
    first = session(rw, "region 1", ran, region=True)
    until(lambda: rw.writers_waiting == 1, "the first region waits")
    assert not rw.contended  # one of two: not due, new sessions still join
    hold = threading.Event()
    joined = session(rw, "joined beside a waiting region", ran, region=False, done=hold)
    until(lambda: ran == ["joined beside a waiting region"], "a session joins while the region is not due")
    second = session(rw, "region 2", ran, region=True)
    until(lambda: rw.writers_waiting == 2, "the second region waits")
    assert rw.contended  # two of two: due
    late = session(rw, "late session", ran, region=False)
    rw.leave()
    hold.set()
    for t in (first, joined, second, late):
        t.join(10)
        assert not t.is_alive()
    # the late session came once the regions were due: it waited for both (the device drained once)
    assert ran[0] == "joined beside a waiting region" and sorted(ran[1:3]) == ["region 1", "region 2"]
    assert ran[3] == "late session"


def test_a_batch_due_after_no_time_is_the_unbatched_lock():
    rw = RWLock(batch=(8, 0.0))
    ran: list[str] = []
    rw.join()
    region = session(rw, "region", ran, region=True)
    until(lambda: rw.writers_waiting == 1, "the region waits")
    assert rw.contended  # due at once: new holds wait behind it
    late = session(rw, "late session", ran, region=False)
    rw.leave()
    for t in (region, late):
        t.join(10)
        assert not t.is_alive()
    assert ran == ["region", "late session"]


def test_a_parked_session_gives_its_slot_back_once():
    slots = Slots(1)
    parked, second_in = threading.Event(), threading.Event()

    def first() -> None:
        with slots.held():
            slots.park()  # waiting for its region: the place goes to the next evaluation
            parked.set()
            assert second_in.wait(10)

    def second() -> None:
        with slots.held():
            second_in.set()

    a = threading.Thread(target=first)
    a.start()
    assert parked.wait(10)
    b = threading.Thread(target=second)
    b.start()
    for t in (a, b):
        t.join(10)
        assert not t.is_alive()
    assert slots._free.acquire(blocking=False) and not slots._free.acquire(blocking=False)  # one place, not two


def test_a_region_parks_its_session_before_it_waits():
    parked: list[str] = []
    rw = RWLock(batch=(1, 0.0), park=lambda: parked.append(threading.current_thread().name))
    rw.join()
    rw.enter_region()  # nothing else holds the device: granted at once, after parking
    assert parked == [threading.current_thread().name]
    rw.leave(exclusive=True)


def test_a_bad_region_batch_is_a_config_error():
    with pytest.raises(ConfigError, match="region_batch"):
        InProcessEvaluator(device="cpu", region_batch=(0, 1.0))


def test_an_evaluator_with_batched_regions_gives_the_same_verdict():
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, region_batch=(2, 1.0)) as ev:
        assert ev.evaluate(request(RELU_SOLUTION, trials=2)).status is Status.CORRECT
        assert ev.device_info()["region_batch"] == (2, 1.0)
