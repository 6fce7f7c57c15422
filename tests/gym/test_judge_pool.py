"""A device's judges: jobs stick to one judge, spread over the pool, survive a judge that dies; the
reference-timing cache times a key once however many evaluations ask at the same time."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from drkernel.gym import InProcessEvaluator
from drkernel.gym.orchestrator.refcache import ReferenceTimingCache
from drkernel.gym.result import Status

from gym_cases import FAST, RELU, RELU_SOLUTION, request


@pytest.fixture(scope="module")
def two_judges():
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2, judges=2) as ev:
        yield ev


def test_jobs_go_to_the_judge_with_the_fewest_jobs_and_stay_there(two_judges):
    rt = two_judges._runtime("cpu")
    deadline = time.monotonic() + 60  # the second judge joins when it is ready
    while len(rt.judges) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(rt.judges) == 2 and rt.info()["judges"] == 2
    assert rt.judges[0].child.pid != rt.judges[1].child.pid
    with rt.judge_for_job() as first:
        with rt.judge_for_job() as second:
            assert {first.index, second.index} == {0, 1}
            with rt.judge_for_job() as third:  # a tie goes to the lowest index
                assert third.index == 0 and rt.judges[0].jobs == 2
        with rt.judge_for_job() as again:  # the second's judge is free again
            assert again.index == second.index
    assert [j.jobs for j in rt.judges] == [0, 0]


def test_concurrent_evaluations_are_compared_by_both_judges(two_judges):
    rt = two_judges._runtime("cpu")
    before = [j.served for j in rt.judges]
    results = [None, None]
    barrier = threading.Barrier(2)

    def one(i: int) -> None:
        barrier.wait()
        results[i] = two_judges.evaluate(request(RELU_SOLUTION, trials=2))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.status is Status.CORRECT for r in results), [r.error for r in results]
    served = [j.served - b for j, b in zip(rt.judges, before)]
    assert all(n > 0 for n in served), served  # each judge compared some job's trials


def test_a_killed_judge_is_restarted_and_the_evaluation_still_ends_correct(two_judges):
    rt = two_judges._runtime("cpu")
    victim = rt.judges[0]
    old = victim.child.pid
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while victim.child.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    r = two_judges.evaluate(request(RELU_SOLUTION))  # goes to judge 0 (fewest jobs, lowest index)
    assert r.status is Status.CORRECT, r.error
    assert victim.child.pid != old and victim.child.alive()


def test_warm_prepares_the_problems_ahead_of_their_evaluations(two_judges):
    spent = two_judges.warm([RELU], FAST)
    assert set(spent) == {RELU.key}
    rt = two_judges._runtime("cpu")
    assert any(key[0] == RELU.code_hash for key in rt._prepared)
    assert two_judges.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT


def test_reference_timings_are_single_flight_per_key():
    cache = ReferenceTimingCache()
    timed: list[str] = []
    gate = threading.Event()
    got: list[tuple[str, dict | None]] = []

    def caller(key: str) -> None:
        with cache.timing(key) as cached:
            if cached is None:
                timed.append(key)
                gate.wait(5)
                cache.put(key, {"median_ms": 1.0, "key": key})
                got.append((key, None))
            else:
                got.append((key, cached))

    threads = [threading.Thread(target=caller, args=("a",)) for _ in range(4)]
    threads.append(threading.Thread(target=caller, args=("b",)))
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while len(timed) < 2 and time.monotonic() < deadline:  # "b" is not held up by "a"
        time.sleep(0.01)
    assert sorted(timed) == ["a", "b"]
    gate.set()
    for t in threads:
        t.join()
    assert sorted(timed) == ["a", "b"]  # each key timed once
    waiters = [c for k, c in got if k == "a" and c is not None]
    assert len(waiters) == 3 and all(c["key"] == "a" for c in waiters)


def test_a_failed_timing_lets_the_next_caller_time_it():
    cache = ReferenceTimingCache()
    with pytest.raises(RuntimeError):
        with cache.timing("k") as cached:
            assert cached is None
            raise RuntimeError("the judge was lost")
    with cache.timing("k") as cached:
        assert cached is None  # nothing was put: this caller times it
        cache.put("k", {"median_ms": 2.0})
    with cache.timing("k") as cached:
        assert cached == {"median_ms": 2.0}


def test_device_memory_claims_wait_in_order_and_an_oversized_one_runs_alone():
    from drkernel.gym.orchestrator.runtime import MemoryBudget

    budget = MemoryBudget(100)
    order: list[str] = []
    inside = threading.Event()
    release_big = threading.Event()

    def claim(name: str, n: int, hold: threading.Event | None = None) -> None:
        with budget.claim(n):
            order.append(name)
            if hold is not None:
                inside.set()
                hold.wait(5)

    with budget.claim(60):
        big = threading.Thread(target=claim, args=("big", 500, release_big))  # more than the budget
        big.start()
        time.sleep(0.05)
        small = threading.Thread(target=claim, args=("small", 10))  # would fit now, but is behind "big"
        small.start()
        time.sleep(0.1)
        assert order == [] and budget.used == 60
    assert inside.wait(5) and order == ["big"] and budget.used == 100  # alone, holding everything
    release_big.set()
    big.join(5)
    small.join(5)
    assert order == ["big", "small"] and budget.used == 0
