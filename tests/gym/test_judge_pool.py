"""A device's judges: jobs stick to one judge, spread over the pool, survive a judge that dies; the
reference-timing cache times a key once however many evaluations ask at the same time."""

from __future__ import annotations

import asyncio
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


# -- shared routing: a job's requests go to a free judge (judge_pool.SharedJudge) ---------------------


class RecordingSlot:
    """A judge slot whose child answers at once and records which jobs' requests reached it (the
    `judge_pool.Slot` protocol, with a real lock)."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.lock = threading.Lock()
        self.seen: list[tuple[str, object]] = []

    def call_locked(self, header, blob, timeout_s, fds):
        assert self.lock.locked()  # the caller holds it
        self.seen.append((header["op"], header.get("trial")))
        return {"op": "released" if header["op"] == "release" else "verdict", "passed": True}


def compare(trial: int, nbytes: int = 4 * 96) -> dict:
    """A compare request whose exported tree holds ``nbytes`` of float32."""
    tree = {"k": "tensor", "dtype": "float32", "shape": [nbytes // 4]}
    return {"op": "compare", "job": "j", "trial": trial, "tree": tree}


def shared_pair():
    from drkernel.gym.orchestrator.judge_pool import JudgeFreed, SharedJudge

    a, b = RecordingSlot(0), RecordingSlot(1)
    freed = JudgeFreed()
    return a, b, SharedJudge([a, b], a, freed), freed


def test_a_shared_request_goes_to_the_jobs_last_judge_while_it_is_free_else_to_a_free_one():
    a, b, job, _ = shared_pair()
    job.call(compare(0), b"", 5.0, None)
    assert [len(a.seen), len(b.seen)] == [1, 0]  # home judge, free
    with a.lock:  # another job's request holds judge 0
        job.call(compare(1), b"", 5.0, None)
    assert [len(a.seen), len(b.seen)] == [1, 1] and job.last is b
    job.call(compare(2), b"", 5.0, None)  # the last judge (1) is free: stays there
    assert [len(a.seen), len(b.seen)] == [1, 2]
    reply = job.call({"op": "release", "job": "j"}, b"", 5.0, None)
    assert reply["op"] == "released"
    assert a.seen[-1][0] == "release" and b.seen[-1][0] == "release"  # every judge the job used


def test_a_shared_request_with_every_judge_busy_takes_the_first_that_frees():
    a, b, job, freed = shared_pair()
    a.lock.acquire()
    b.lock.acquire()
    done = threading.Event()
    thread = threading.Thread(target=lambda: (job.call(compare(0), b"", 5.0, None), done.set()))
    thread.start()
    b.lock.release()  # judge 1 frees first; judge 0 stays busy throughout
    freed.notify()
    assert done.wait(10)
    thread.join(5)
    assert a.seen == [] and b.seen == [("compare", 0)]
    a.lock.release()


def test_a_large_export_stays_with_the_jobs_last_judge_even_when_another_is_free():
    from drkernel.gym.orchestrator.judge_pool import SHARED_MAX_BYTES

    a, b, job, _ = shared_pair()
    a.lock.acquire()
    got = threading.Event()
    thread = threading.Thread(target=lambda: (job.call(compare(0, SHARED_MAX_BYTES + 4), b"", 5.0, None), got.set()))
    thread.start()
    assert not got.wait(0.2)  # waits for its own judge, not the free one
    a.lock.release()
    assert got.wait(10)
    thread.join(5)
    assert a.seen == [("compare", 0)] and b.seen == []


def test_an_unknown_judge_routing_is_a_config_error():
    from drkernel.errors import ConfigError

    with pytest.raises(ConfigError, match="judge_routing"):
        InProcessEvaluator(device="cpu", judge_routing="roundrobin")


def test_shared_routing_gives_the_verdicts_of_sticky_routing(two_judges):
    """Real judges and candidates: the same solutions under both routings, the same statuses; under
    shared routing concurrent jobs' requests reach both judges and each job is released."""
    wrong = RELU_SOLUTION.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)")
    reqs = [request(RELU_SOLUTION, trials=3), request(wrong, trials=3), request(RELU_SOLUTION, trials=3)]
    sticky = [two_judges.evaluate(r).status for r in reqs]
    with InProcessEvaluator(device="cpu", concurrency=3, pool_size=3, judges=2, judge_routing="shared") as ev:
        rt = ev._runtime("cpu")
        deadline = time.monotonic() + 60
        while len(rt.judges) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        shared = [r.status for r in asyncio.run(ev.evaluate_batch(reqs))]
        assert ev.device_info()["judge_routing"] == "shared"
        assert all(j.served > 0 for j in rt.judges), [j.served for j in rt.judges]
    assert sticky == shared == [Status.CORRECT, Status.INCORRECT, Status.CORRECT]
