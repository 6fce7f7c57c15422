"""The service under hostile clients, continued: shares that one client cannot take from another.
A real server on loopback (one CPU worker with two slots, the directive evaluator, whose kill ends a
sleeping evaluation as a crash, as the gym's does) and small limits on what comes without a verified
token and on jobs submitted; floods come from addresses of their own (127.0.0.2, 127.0.0.3: loopback
too), so the test's own polling from 127.0.0.1 keeps its budget."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from service_server import DIRECTIVE, SMALL_REFERENCE, SRC, ServerProcess, http_client as _http, until

from drkernel.service.scheduler import (PROTECT_BASE_S, fair_share, fair_share_excess, pick_preempted, protected_s,
                                        reserved_slots)
from drkernel.service.store import Job, JobStatus

PEER_BURST = 150
SUBMIT_BURST = 60


def _drkernel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "drkernel", "gym", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=120)


@pytest.fixture(scope="module")
def shares(tmp_path_factory):
    """One server for the module's preemption tests, reservations off (``--reserve-s 0``): these tests
    drive preemption and its windows, what still bounds a wait once a client has been away longer
    than ``reserve_s`` (with them on, one test's clients would keep their slots into the next test;
    the `reserving` tests below run with them on)."""
    db = tmp_path_factory.mktemp("shares") / "jobs.sqlite"
    tokens = {}
    for name in ("alice", "bob", "carol", "dave", "erin"):
        out = _drkernel("token", "add", name, "--db", str(db))
        assert out.returncode == 0, out.stderr
        tokens[name] = out.stdout.strip()
    srv = ServerProcess(db, "--devices", "cpu:1", "--slots", "2", "--evaluator", DIRECTIVE,
                        "--rate-per-peer", "0.001", "--peer-burst", str(PEER_BURST), "--token-ttl-s", "3600",
                        "--submit-rate-per-client", "0.001", "--submit-burst", str(SUBMIT_BURST),
                        "--max-batch", "50", "--reserve-s", "0")
    srv.start()
    yield srv, tokens
    srv.stop()


def _job(solution: str) -> dict:
    problem = {"name": "double", "level": 1, "code": SMALL_REFERENCE, "source": "test"}
    return {"problem": problem, "solution": solution, "config": {"device": "cpu"}}


def _until(predicate, what: str, deadline_s: float = 60.0) -> None:
    until(predicate, what, deadline_s, 0.1)


def _metric(srv, name: str) -> float:
    for line in httpx.get(f"{srv.url}/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize("slots, running, waiting, gives_back", [
    (2, {"a": 2}, {"b"}, "a"),              # share 1 each: a holds 2, b none
    (2, {"a": 1, "b": 1}, {"c"}, None),     # 3 clients, 2 slots: nobody holds more than 1
    (2, {"a": 2}, {"b", "c"}, "a"),         # then a 1, b 1, c waits: nobody over 1
    (3, {"a": 3}, {"b"}, "a"),              # share 1.5: a over 2, b under 1
    (3, {"a": 2, "b": 1}, {"a", "b"}, None),  # a at ceil(1.5) = 2: its share
    (1, {"a": 1}, {"b"}, None),             # one slot never preempts
    (2, {"a": 2}, {"a"}, None),             # nobody else waits
    (4, {"a": 3, "b": 1}, {"c"}, "a"),      # share 4/3: c under 1, a over 2
    (2, {}, set(), None),                   # a full worker whose jobs were all cancelled: nobody
])
def test_fair_share_worked_cases(slots, running, waiting, gives_back):
    assert fair_share_excess(slots, running, waiting) == gives_back


@pytest.mark.parametrize("slots, n, share", [(2, 2, (1, 1)), (3, 2, (1, 2)), (2, 3, (0, 1)), (1, 2, (0, 1)),
                                             (4, 1, (4, 4))])
def test_fair_share_in_whole_slots(slots, n, share):
    assert fair_share(slots, n) == share


@pytest.mark.parametrize("slots, running, recent, waiting, owed", [
    # round 14: alice's job just ended, mallory runs 1 and has more queued: alice's slot is kept
    (2, {"m": 1}, {"a", "m"}, {"m"}, {"a": 1}),
    (2, {}, {"a"}, set(), {"a": 2}),                  # alice alone: kept for her, nobody held back
    (1, {"m": 1}, {"a", "m"}, {"m"}, {}),             # one slot: half a slot each keeps nothing
    (2, {"m": 1}, {"a", "m"}, {"c", "m"}, {}),        # 3 clients, 2 slots: a floor of 0 keeps nothing
    (4, {"m": 3, "a": 1}, {"a", "m"}, {"m"}, {"a": 1}),  # alice holds 1 of her 2
    (2, {"a": 1, "m": 1}, {"a", "m"}, {"m"}, {}),     # alice holds her share: nothing more
    (3, {"m": 2}, {"a", "m"}, {"m", "b"}, {"a": 1, "b": 1}),  # bob's slot kept too, not blocked by alice's
    (2, {"m": 1}, {"m"}, {"m", "b"}, {}),             # only a waiting client owed: claims go as before
    (2, {}, set(), set(), {}),                        # nobody at all
])
def test_reserved_slots_worked_cases(slots, running, recent, waiting, owed):
    assert reserved_slots(slots, running, recent, waiting) == owed


def _running(job_id: str, started: float) -> Job:
    return Job(job_id, JobStatus.RUNNING, "h", None, 0, 0, 1, "c", "cpu-0", 0.0, started, None, None, None, None,
               False, None, "", client="a")


@pytest.mark.parametrize("started, given_back, chosen", [
    ({"A1": 1, "A2": 2}, {}, "A2"),                         # the latest started: least work lost
    ({"A1": 1, "A2": 2}, {"A2": 1}, "A1"),                  # given back fewer times first
    ({"A1": 95, "A2": 97}, {"A1": 1, "A2": 1}, None),       # both in their first window (30 s)
    ({"A1": 65, "A2": 97}, {"A1": 1, "A2": 1}, "A1"),       # A1's window is over: not exempt for good
    ({"A1": 1, "A2": 2, "A3": 3}, {"A2": 1, "A3": 1}, "A1"),  # the one never given back
    ({"A1": 85}, {"A1": 2}, None),                          # given back twice: a 60-s window
    ({"A1": 30}, {"A1": 2}, "A1"),                          # ... which has passed
    ({}, {}, None),                                         # nothing running: nothing to give back
])
def test_which_job_is_given_back_worked_cases(started, given_back, chosen):
    picked = pick_preempted([_running(i, t) for i, t in started.items()], given_back, now=100.0)
    assert (picked.id if picked else None) == chosen


def test_a_jobs_protected_window_doubles_with_each_give_back():
    assert [protected_s(k) for k in range(5)] == [0.0, PROTECT_BASE_S, 2 * PROTECT_BASE_S, 4 * PROTECT_BASE_S,
                                                   8 * PROTECT_BASE_S]


def test_arrivals_one_at_a_time_cannot_make_a_job_start_over_forever(shares):
    """Hostile round 12 (A18): alice's two jobs fill the worker and bob sends one quick job at a time;
    each arrival used to preempt one of alice's, alternately, so neither ever finished. Now a job given
    back runs its next `PROTECT_BASE_S` (30 s) unpreempted: the first two arrivals each preempt one of
    hers, the third finds both in their window and starts only once one of hers has ended (a 10-s
    job), and both of hers end with their result on their first attempt, after two preemptions."""
    srv, tokens = shares
    before = _metric(srv, "kernelgym_jobs_preempted_total")
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        long_jobs = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 10\n# r{i}"))
                     .json()["id"] for i in range(2)]
        bobs = []
        for k in range(4):
            _until(lambda: all(alice.get(f"/v1/jobs/{j}").json()["status"] != "queued" for j in long_jobs),
                   "none of alice's jobs queued")
            short = bob.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 0.1\n# rb{k}")).json()["id"]
            bobs.append(bob.get(f"/v1/jobs/{short}/wait?timeout=60").json())
            assert bobs[-1]["status"] == "done", (k, bobs[-1])
        theirs = [alice.get(f"/v1/jobs/{j}/wait?timeout=60").json() for j in long_jobs]
        ends = [(j["status"], j["result"]["status"], j["attempts"]) for j in theirs]
        assert ends == [("done", "correct", 1)] * 2, theirs
        assert _metric(srv, "kernelgym_jobs_preempted_total") <= before + 2
        assert bobs[2]["started_at"] >= min(j["finished_at"] for j in theirs), (bobs, theirs)


def test_a_preempted_job_whose_kill_ends_its_reference_is_queued_again(shares):
    """A custom problem's reference runs in a judge of its own, killed with the job: a preempted job of
    alice's whose kill surfaces as its reference failing is queued again (attempt uncounted), not
    failed as if her reference were broken."""
    srv, tokens = shares
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        long_jobs = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 300\n# killed: reference_error\n# r{i}"))
                     .json()["id"] for i in range(2)]
        _until(lambda: all(alice.get(f"/v1/jobs/{j}").json()["status"] == "running" for j in long_jobs),
               "both of alice's jobs running")
        short = bob.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 0.1\n# rb")).json()["id"]
        assert bob.get(f"/v1/jobs/{short}/wait?timeout=50").json()["status"] == "done"
        theirs = [alice.get(f"/v1/jobs/{j}").json() for j in long_jobs]
        assert [j["status"] in ("queued", "running") for j in theirs] == [True, True], theirs
        assert [j["attempts"] for j in theirs] == [1, 1], theirs
        for j in long_jobs:
            assert alice.delete(f"/v1/jobs/{j}").json()["status"] == "cancelled"


def test_cancelling_every_job_of_a_full_worker_leaves_dispatch_running(shares):
    """alice fills both slots and cancels both at once; bob's job, submitted after, still runs. (The
    fair-share arithmetic divided by the zero clients left and the dispatch loop died with it, for
    good, while health said ok.)"""
    srv, tokens = shares
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        jobs = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 300\n# c{i}")).json()["id"]
                for i in range(2)]
        _until(lambda: all(alice.get(f"/v1/jobs/{j}").json()["status"] == "running" for j in jobs),
               "both of alice's jobs running")
        for j in jobs:
            assert alice.delete(f"/v1/jobs/{j}").json()["status"] == "cancelled"
        for k in range(2):
            short = bob.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 0.1\n# after{k}")).json()["id"]
            assert bob.get(f"/v1/jobs/{short}/wait?timeout=50").json()["status"] == "done"


def test_floods_without_a_verified_token_are_limited_per_address(shares):
    """From 127.0.0.2: exactly the burst of /metrics passes, then /metrics and unknown tokens are 429s
    (no lookup is made for them); health, a verified token from that address, and 127.0.0.1 still pass."""
    srv, tokens = shares
    with _http(srv, tokens["carol"]) as carol:
        assert carol.get("/v1/queue").status_code == 200  # verified (and kept for the token TTL)
    with _http(srv, source="127.0.0.2") as flood:
        codes = [flood.get("/metrics").status_code for _ in range(PEER_BURST + 20)]
        assert codes.count(200) == PEER_BURST and codes[PEER_BURST:] == [429] * 20
        assert flood.get("/v1/health").status_code == 200  # health pays no bucket (hostile round 11)
        unknown = flood.get("/v1/queue", headers={"Authorization": "Bearer not-a-token-at-all"})
        assert unknown.status_code == 429 and int(unknown.headers["Retry-After"]) >= 1
    with _http(srv, tokens["carol"], source="127.0.0.2") as carol:
        assert carol.get("/v1/queue").status_code == 200
    with _http(srv, source="127.0.0.3") as other:
        assert other.get("/v1/queue", headers={"Authorization": "Bearer not-a-token-at-all"}).status_code == 401
    assert httpx.get(f"{srv.url}/v1/health").status_code == 200


def test_token_lookups_and_reads_do_not_wait_for_the_store_write_lock(shares):
    """Another process holds the store's write lock: a token never used before is still verified,
    and the queue, health and metrics still answer (they read through the store's read connection,
    off the event loop)."""
    srv, tokens = shares
    holder = sqlite3.connect(srv.db, isolation_level=None, timeout=5)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with _http(srv, tokens["dave"]) as dave:
            dave.timeout = httpx.Timeout(20.0)
            assert dave.get("/v1/queue").status_code == 200
            assert dave.get("/v1/workers").status_code == 200
        assert httpx.get(f"{srv.url}/v1/health", timeout=20).status_code == 200
        assert "kernelgym_jobs" in httpx.get(f"{srv.url}/metrics", timeout=20).text
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_cached_submissions_count_against_the_submit_rate(shares):
    """A cached job is done at once (no queued-job quota sees it); each still costs one job of the
    client's submission budget: 60 pass (1 evaluated, 59 cached), the next is a 429."""
    srv, tokens = shares
    body = _job("class ModelNew: pass\n# cached")
    with _http(srv, tokens["erin"]) as erin:
        first = erin.post("/v1/jobs", json=body).json()["id"]
        assert erin.get(f"/v1/jobs/{first}/wait?timeout=60").json()["status"] == "done"
        batch = erin.post("/v1/jobs/batch", json={"requests": [body] * 50}).json()["jobs"]
        assert all(j["cached"] for j in batch)
        singles = [erin.post("/v1/jobs", json=body) for _ in range(SUBMIT_BURST - 51)]
        assert all(r.status_code == 202 and r.json()["cached"] for r in singles)
        over = erin.post("/v1/jobs", json=body)
    assert over.status_code == 429 and "submit_rate_per_client" in over.json()["detail"]
    assert int(over.headers["Retry-After"]) >= 1


def test_submit_then_cancel_cycles_cannot_make_a_job_start_over_and_over(shares):
    """dave's two long jobs fill both slots. carol's job preempts the one started last (D2); carol
    cancels it, so she preempts no one again before a result of hers: her next job waits. bob's job
    then preempts D1, never D2 a second time: each of dave's jobs started over once, no more."""
    srv, tokens = shares
    before = _metric(srv, "kernelgym_jobs_preempted_total")
    with _http(srv, tokens["dave"]) as dave, _http(srv, tokens["carol"]) as carol, \
            _http(srv, tokens["bob"]) as bob:
        def job(j):
            return dave.get(f"/v1/jobs/{j}").json()

        mine = [dave.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 300\n# d{i}")).json()["id"]
                for i in range(2)]
        _until(lambda: all(job(j)["status"] == "running" for j in mine), "both of dave's jobs running")
        c1 = carol.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 300\n# c1")).json()["id"]
        _until(lambda: carol.get(f"/v1/jobs/{c1}").json()["status"] == "running", "carol's job running")
        assert carol.delete(f"/v1/jobs/{c1}").json()["status"] == "cancelled"
        _until(lambda: all(job(j)["status"] == "running" for j in mine), "dave's preempted job back")
        started = [job(j)["started_at"] for j in mine]
        c2 = carol.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 0.1\n# c2")).json()["id"]
        b1 = bob.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 0.1\n# b1")).json()["id"]
        assert bob.get(f"/v1/jobs/{b1}/wait?timeout=50").json()["status"] == "done"
        assert carol.get(f"/v1/jobs/{c2}/wait?timeout=50").json()["status"] == "done"
        _until(lambda: all(job(j)["status"] == "running" for j in mine), "dave's jobs running again")
        now = [job(j)["started_at"] for j in mine]
        assert _metric(srv, "kernelgym_jobs_preempted_total") == before + 2
        assert now[0] != started[0] and now[1] == started[1], (started, now)  # D1 restarted, D2 not again
        assert [job(j)["attempts"] for j in mine] == [1, 1]
        for j in mine:
            dave.delete(f"/v1/jobs/{j}")


ANSWER_BURST = 20_000


@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """A server whose clients' reads may return 20 kB at once and then 1 byte a second (never
    refilled within a test), clients alice and mallory."""
    db = tmp_path_factory.mktemp("answers") / "jobs.sqlite"
    tokens = {name: _drkernel("token", "add", name, "--db", str(db)).stdout.strip()
              for name in ("alice", "mallory")}
    srv = ServerProcess(db, "--devices", "cpu:1", "--evaluator", DIRECTIVE, "--answer-bytes-per-client", "1",
                        "--answer-burst-bytes", str(ANSWER_BURST))
    srv.start()
    yield srv, tokens
    srv.stop()


def test_what_a_clients_reads_return_is_charged_to_it_alone(answers):
    """Hostile round 12 (A17): mallory's 8 long polls, each on thousands of finished jobs, were
    answered 100x the bytes they sent, and every other client's reads slowed 280x. Now each answer is
    charged to its client and a client's reads are made one at a time: of 8 polls sent at once on 20
    finished jobs (at least 10 kB an answer), at most two are answered before mallory owes (one beyond
    her balance), the rest are 429 with a Retry-After, as is her next read of one job; alice's reads
    are untouched."""
    srv, tokens = answers
    body = _job("class ModelNew: pass\n# amplified")
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["mallory"]) as mallory:
        mine = alice.post("/v1/jobs", json=_job("class ModelNew: pass\n# alice's own")).json()["id"]
        first = mallory.post("/v1/jobs", json=body).json()["id"]
        assert mallory.get(f"/v1/jobs/{first}/wait?timeout=60").json()["status"] == "done"
        ids = [j["id"] for j in mallory.post("/v1/jobs/batch", json={"requests": [body] * 20}).json()["jobs"]]

        def poll(_):
            with _http(srv, tokens["mallory"]) as own:
                return own.post("/v1/jobs/wait", json={"ids": ids, "timeout": 0})

        with ThreadPoolExecutor(8) as pool:
            polls = list(pool.map(poll, range(8)))
        answered = [r for r in polls if r.status_code == 200]
        assert 1 <= len(answered) <= 2, [r.status_code for r in polls]
        assert all(len(r.json()["jobs"]) == 20 for r in answered)
        refused = [r for r in polls if r.status_code == 429]
        assert len(refused) == 8 - len(answered) and all(int(r.headers["Retry-After"]) >= 1 for r in refused)
        assert "answer_bytes_per_client" in refused[0].json()["detail"]
        assert mallory.get(f"/v1/jobs/{first}").status_code == 429
        assert alice.get(f"/v1/jobs/{mine}/wait?timeout=60").json()["status"] == "done"
        assert alice.post("/v1/jobs/wait", json={"ids": [mine], "timeout": 0}).status_code == 200


def _restarts(client) -> list[int]:
    """Each worker's restarts, from the workers endpoint."""
    workers = client.get("/v1/workers").json()
    return [w["restarts"] for w in (workers if isinstance(workers, list) else workers["workers"])]


@pytest.fixture
def short_grace(tmp_path):
    """A server of its own (the tests below kill or stop jobs): one CPU worker, two slots, a 1-s grace,
    clients alice and bob."""
    db = tmp_path / "jobs.sqlite"
    tokens = {name: _drkernel("token", "add", name, "--db", str(db)).stdout.strip() for name in ("alice", "bob")}
    srv = ServerProcess(db, "--devices", "cpu:1", "--slots", "2", "--evaluator", DIRECTIVE,
                        "--job-timeout-grace-s", "1")
    srv.start()
    yield srv, tokens
    srv.stop()


def test_a_job_past_its_deadline_is_stopped_alone_not_with_its_worker(short_grace):
    """alice's job keeps going past timeout_s + grace (a reference whose every judge call stays under
    its own limit does this): it is stopped alone and ends `timeout`; bob's job in the worker's other
    slot finishes on its first attempt and the worker is never restarted."""
    srv, tokens = short_grace
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        # its own judge dies with the stop (a custom reference's): still a timeout, not a reference error
        slow = {**_job("class ModelNew: pass\n# sleep: 300\n# killed: reference_error\n# overdue"),
                "config": {"device": "cpu", "timeout_s": 2}}
        overdue = alice.post("/v1/jobs", json=slow).json()["id"]
        _until(lambda: alice.get(f"/v1/jobs/{overdue}").json()["status"] == "running", "alice's job running")
        fine = bob.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 6\n# neighbour")).json()["id"]
        ended = alice.get(f"/v1/jobs/{overdue}/wait?timeout=40").json()
        assert ended["status"] == "done" and ended["result"]["status"] == "timeout", ended
        mine = bob.get(f"/v1/jobs/{fine}/wait?timeout=40").json()
        assert mine["status"] == "done" and mine["result"]["status"] == "correct", mine
        assert mine["attempts"] == 1, mine
        restarts = _restarts(bob)
        assert restarts and restarts == [0] * len(restarts), restarts


def test_a_worker_killed_for_a_job_that_would_not_stop_costs_its_neighbours_nothing(short_grace):
    """alice's job cannot be stopped alone (no cancel reaches it), so its worker is killed: bob's job,
    in the worker's other slot, goes back to the queue with its attempt uncounted."""
    srv, tokens = short_grace
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        stuck = {**_job("class ModelNew: pass\n# hang: 120\n# stuck"), "config": {"device": "cpu", "timeout_s": 2}}
        hung = alice.post("/v1/jobs", json=stuck).json()["id"]
        _until(lambda: alice.get(f"/v1/jobs/{hung}").json()["status"] == "running", "alice's job running")
        beside = bob.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 300\n# beside")).json()["id"]
        _until(lambda: bob.get(f"/v1/jobs/{beside}").json()["status"] == "running", "bob's job running")
        _until(lambda: alice.get(f"/v1/jobs/{hung}").json()["status"] != "running" or
               alice.get(f"/v1/jobs/{hung}").json()["attempts"] > 1, "alice's worker killed", 90)
        _until(lambda: _restarts(bob)[0] >= 1, "the worker restarted", 90)
        mine = bob.get(f"/v1/jobs/{beside}").json()
        assert mine["status"] in ("queued", "running") and mine["attempts"] <= 1, mine
        bob.delete(f"/v1/jobs/{beside}")
        alice.delete(f"/v1/jobs/{hung}")


def test_a_retry_runs_alone_only_for_a_while(short_grace):
    """Hostile round 12 (A04): bob's two long jobs were in flight when their worker was killed, so both
    run again as retries, and a retry runs alone on its worker; it used to do so for its whole
    timeout_s, one retry after the other, while alice's small job waited. Now the worker takes
    alice's job beside the retry once it has run alone for `RETRY_ALONE_S`: hers ends while bob's
    retry still runs."""
    srv, tokens = short_grace
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["bob"]) as bob:
        def states():
            return [bob.get(f"/v1/jobs/{j}").json() for j in long_jobs]

        long_jobs = [bob.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 200\n# lost{i}"))
                     .json()["id"] for i in range(2)]
        _until(lambda: all(j["status"] == "running" for j in states()), "both of bob's jobs running")
        os.kill(bob.get("/v1/workers").json()[0]["pid"], signal.SIGKILL)
        _until(lambda: any(j["status"] == "running" and j["attempts"] == 2 for j in states()),
               "one of bob's jobs running again as a retry", 90)
        small = alice.post("/v1/jobs", json=_job("class ModelNew: pass\n# sleep: 0.1\n# beside")).json()["id"]
        mine = alice.get(f"/v1/jobs/{small}/wait?timeout=55").json()
        assert mine["status"] == "done" and mine["result"]["status"] == "correct", mine
        retry = [j for j in states() if j["attempts"] == 2 and j["started_at"] < mine["started_at"]]
        assert retry and retry[0]["status"] == "running", states()
        for j in long_jobs:
            bob.delete(f"/v1/jobs/{j}")


@pytest.fixture(scope="module")
def lapsing(tmp_path_factory):
    """Tokens verified for 0.2 s only, and a peer bucket of 5 that never refills."""
    db = tmp_path_factory.mktemp("lapsing") / "jobs.sqlite"
    out = _drkernel("token", "add", "alice", "--db", str(db))
    assert out.returncode == 0, out.stderr
    srv = ServerProcess(db, "--devices", "cpu:1", "--evaluator", DIRECTIVE, "--rate-per-peer", "0.001",
                        "--peer-burst", "5", "--token-ttl-s", "0.2")
    srv.start()
    yield srv, out.stdout.strip()
    srv.stop()


def test_an_anonymous_flood_from_a_clients_address_fails_neither_health_nor_the_client(lapsing):
    """Hostile round 11: /metrics flooded from the address alice uses emptied its bucket; health then
    answered 429, and so did alice each time her token's cache lapsed (its re-check paid from that
    bucket). Now health pays no bucket and the re-check of a token that named a client is the client's."""
    srv, token = lapsing
    with _http(srv, token) as alice:
        assert alice.get("/v1/queue").status_code == 200  # verified once
    with _http(srv) as flood:
        assert [flood.get("/metrics").status_code for _ in range(8)][-3:] == [429] * 3
    time.sleep(0.5)  # alice's token is no longer cached: the next request looks it up again
    with _http(srv, token) as alice:
        assert alice.get("/v1/queue").status_code == 200
    assert httpx.get(f"{srv.url}/v1/health").status_code == 200
    with _http(srv) as flood:
        assert flood.get("/v1/queue", headers={"Authorization": "Bearer not-a-token"}).status_code == 429


@pytest.fixture
def reserving(tmp_path):
    """A server of its own per test: one CPU worker with two slots, clients alice and mallory; a test
    passes its ``--reserve-s`` through ``start``."""
    db = tmp_path / "jobs.sqlite"
    tokens = {name: _drkernel("token", "add", name, "--db", str(db)).stdout.strip() for name in ("alice", "mallory")}
    servers = []

    def start(reserve_s: float) -> ServerProcess:
        servers.append(ServerProcess(db, "--devices", "cpu:1", "--slots", "2", "--evaluator", DIRECTIVE,
                                     "--reserve-s", str(reserve_s)).start())
        return servers[-1]

    yield start, tokens
    for srv in servers:
        srv.stop()


def _mallorys_long_jobs(mallory) -> list[str]:
    """Three long jobs of mallory's, two of them running (both slots)."""
    ids = [mallory.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 300\n# m{i}")).json()["id"]
           for i in range(3)]
    _until(lambda: len(_mallorys_running(mallory, ids)) == 2, "two of mallory's jobs running")
    return ids


def _mallorys_running(mallory, ids: list[str]) -> dict[str, float]:
    """mallory's running jobs: id -> when its current run started."""
    jobs = [mallory.get(f"/v1/jobs/{j}").json() for j in ids]
    return {j["id"]: j["started_at"] for j in jobs if j["status"] == "running"}


def _alices_job(alice, k: int) -> dict:
    job_id = alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 0.3\n# a{k}")).json()["id"]
    done = alice.get(f"/v1/jobs/{job_id}/wait?timeout=60").json()
    assert done["status"] == "done" and done["result"]["status"] == "correct", done
    return done


def test_a_client_sending_one_job_at_a_time_keeps_its_slot(reserving):
    """Hostile round 14: mallory keeps long jobs queued and alice sends one short job at a time. Each
    time alice's job ended, her slot went to a queued job of mallory's, her next job preempted it,
    and the window of the job given back doubled: her waits grew 4, 29, 58, 118, 238 s. Now her
    first job preempts one of mallory's (mallory held both slots), and then her slot is kept for her:
    her next five jobs find it free, none preempts, and mallory's job in the other slot runs on
    untouched (her share)."""
    start, tokens = reserving
    srv = start(60)
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["mallory"]) as mallory:
        theirs = _mallorys_long_jobs(mallory)
        first = _alices_job(alice, 0)
        assert _metric(srv, "kernelgym_jobs_preempted_total") == 1
        kept = _mallorys_running(mallory, theirs)
        assert len(kept) == 1, kept  # mallory's preempted job waits: alice's slot is kept
        mine = [_alices_job(alice, k) for k in range(1, 6)]
        assert _metric(srv, "kernelgym_jobs_preempted_total") == 1  # none of them preempted anyone
        assert _mallorys_running(mallory, theirs) == kept  # mallory's one job ran on, never restarted
        assert all(j["attempts"] == 1 for j in [first, *mine])
        # each claimed at once (well under a window: none was needed)
        assert all(j["started_at"] - j["created_at"] < PROTECT_BASE_S for j in mine), mine
        for j in theirs:
            mallory.delete(f"/v1/jobs/{j}")


def test_a_client_away_longer_than_its_reservation_preempts_once(reserving):
    """With ``--reserve-s 1``: alice's first job preempts one of mallory's; alice is then away longer
    than a second, so mallory's queued job takes the slot back (both of mallory's running again),
    and alice's next job preempts once more (the job never given back: no window to wait out)."""
    start, tokens = reserving
    srv = start(1)
    with _http(srv, tokens["alice"]) as alice, _http(srv, tokens["mallory"]) as mallory:
        theirs = _mallorys_long_jobs(mallory)
        _alices_job(alice, 0)
        _until(lambda: len(_mallorys_running(mallory, theirs)) == 2, "mallory holding both slots again")
        _alices_job(alice, 1)
        assert _metric(srv, "kernelgym_jobs_preempted_total") == 2
        for j in theirs:
            mallory.delete(f"/v1/jobs/{j}")


def test_a_lone_client_uses_every_slot(reserving):
    """alice alone (nobody else was ever active): after a job of hers ends, her next two run at once;
    what her reservation keeps is hers."""
    start, tokens = reserving
    srv = start(60)
    with _http(srv, tokens["alice"]) as alice:
        _alices_job(alice, 0)
        both = [alice.post("/v1/jobs", json=_job(f"class ModelNew: pass\n# sleep: 300\n# both{i}")).json()["id"]
                for i in range(2)]
        _until(lambda: all(alice.get(f"/v1/jobs/{j}").json()["status"] == "running" for j in both),
               "both of alice's jobs running", 30)
        for j in both:
            alice.delete(f"/v1/jobs/{j}")
