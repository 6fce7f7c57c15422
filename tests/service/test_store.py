"""JobStore on a real SQLite file: claims, leases, attempts, idempotency, cache and coalescing."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3
import time

import pytest

from drkernel.service.store import (SUBMIT_CHUNK, Cancel, IdempotencyConflict, JobStatus, JobStore, NewJob, Quota,
                                    QuotaExceeded, may_take)


def _job(n: int, est: int = 10, key: str | None = None, cache_keys=(), req: str | None = None) -> NewJob:
    return NewJob(
        request_json=f'{{"request_id": "r{n}"}}',
        req_hash=req or f"h{n}",
        est_bytes=est,
        cache_keys=tuple(cache_keys),
        idem_key=key,
    )


@pytest.fixture
def store(tmp_path):
    s = JobStore(tmp_path / "jobs.sqlite", max_attempts=2)
    yield s
    s.close()


def test_wal_mode_and_durable_before_ack(tmp_path):
    s = JobStore(tmp_path / "a.sqlite")
    ((job, created),) = s.submit([_job(1)])
    # a second connection (another process after a crash) sees the job as soon as submit returned
    other = sqlite3.connect(tmp_path / "a.sqlite")
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.execute("SELECT status FROM jobs WHERE id = ?", (job.id,)).fetchone()[0] == "queued"
    assert created and job.status is JobStatus.QUEUED


def test_claim_complete_and_order(store):
    ids = [j.id for j, _ in store.submit([_job(i) for i in range(3)])]
    claimed = store.claim("w0", 2, budget_bytes=100, idle=True, lease_s=30)
    assert [j.id for j in claimed] == ids[:2]  # oldest first
    assert all(j.status is JobStatus.RUNNING and j.attempts == 1 and j.worker == "w0" for j in claimed)
    fin = store.complete(claimed[0].id, claimed[0].claim, '{"status": "correct"}', cache_key="k0")
    assert fin.ids == [ids[0]] and fin.current
    assert store.get(ids[0]).status is JobStatus.DONE
    assert store.counts() == {"queued": 1, "running": 1, "done": 1, "failed": 0, "cancelled": 0}


def test_idempotency_key_returns_same_job_and_conflicts_on_other_request(store):
    ((a, created_a),) = store.submit([_job(1, key="k")])
    ((b, created_b),) = store.submit([_job(1, key="k")])
    assert created_a and not created_b and a.id == b.id
    with pytest.raises(IdempotencyConflict):
        store.submit([_job(2, key="k")])
    assert store.counts()["queued"] == 1


def test_a_batch_refused_in_a_later_chunk_stores_nothing_and_frees_its_keys(store):
    """Item 0 takes key "k"; item SUBMIT_CHUNK + 1 (in the second write transaction) uses "k" for another
    request: the batch is refused, the first chunk's jobs are withdrawn (none queued), and "k" is
    free for the request that retries."""
    batch = [_job(0, key="k")] + [_job(i) for i in range(1, SUBMIT_CHUNK + 1)] + [_job(9999, key="k")]
    with pytest.raises(IdempotencyConflict):
        store.submit(batch)
    assert store.counts()["queued"] == 0
    assert store.claim("w", 5, 1000, True, 30) == []
    ((retry, created),) = store.submit([_job(9999, key="k")])
    assert created and retry.status is JobStatus.QUEUED


def test_a_batch_over_the_quota_is_refused_whole_from_its_first_chunk(store):
    """Quota 300 jobs, a batch of 2 * SUBMIT_CHUNK: the first chunk counts the rest of its batch, so
    nothing is stored."""
    with pytest.raises(QuotaExceeded):
        store.submit([_job(i) for i in range(2 * SUBMIT_CHUNK)], Quota(300, 1 << 30))
    assert store.counts()["queued"] == 0


def test_cache_hit_at_submit_costs_nothing(store):
    ((j, _),) = store.submit([_job(1)])
    (c,) = store.claim("w", 1, 100, True, 30)
    store.complete(c.id, c.claim, '{"status": "correct"}', cache_key="content-h1")
    ((dup, created),) = store.submit([_job(9, cache_keys=["other", "content-h1"])])
    assert created and dup.status is JobStatus.DONE and dup.cached
    assert dup.result_json == '{"status": "correct"}'
    assert store.claim("w", 5, 100, True, 30) == []


def test_duplicates_coalesce_with_a_running_job(store):
    ids = [j.id for j, _ in store.submit([_job(i, req="same") for i in range(4)] + [_job(7)])]
    first = store.claim("w", 5, 1000, True, 30)
    # only one job of the request hash runs; its duplicates wait, the other request goes too
    assert sorted(j.id for j in first) == sorted([ids[0], ids[4]])
    fin = store.complete(ids[0], first[0].claim, '{"status": "incorrect"}', cache_key=None)
    assert sorted(fin.ids) == sorted(ids[:4])
    assert all(store.get(i).status is JobStatus.DONE for i in ids[:4])
    assert [store.get(i).cached for i in ids[:4]] == [False, True, True, True]


def test_ends_reads_status_and_times_of_known_jobs_only(store):
    """What a finished job's metrics need (status, created, finished) for 600 ids, past one chunk of
    500; an unknown id is left out, a queued job has no end time."""
    ids = [j.id for j, _ in store.submit([_job(i) for i in range(600)])]
    (c,) = store.claim("w", 1, 100, True, 30)
    store.complete(c.id, c.claim, '{"status": "correct"}', cache_key=None)
    ends = store.ends([*ids, "no-such-job"])
    assert len(ends) == 600
    assert sorted(status for status, _, _ in ends).count("done") == 1
    assert all((finished is None) == (status == "queued") for status, _, finished in ends)
    assert all(finished is None or finished >= created for _, created, finished in ends)


def test_admission_by_estimated_bytes(store):
    store.submit([_job(1, est=60), _job(2, est=60), _job(3, est=30), _job(4, est=500)])
    got = store.claim("w", 4, budget_bytes=100, idle=False, lease_s=30)
    assert [j.est_bytes for j in got] == [60, 30]  # 60 + 60 does not fit; 30 does; 500 never
    got2 = store.claim("w", 4, budget_bytes=10, idle=True, lease_s=30)
    assert [j.est_bytes for j in got2] == [60]  # an idle worker takes one job over its budget
    assert store.claim("w", 4, budget_bytes=10, idle=False, lease_s=30) == []


def test_infra_failure_retried_once_then_failed_with_cause(store):
    ((j, _),) = store.submit([_job(1)])
    (c1,) = store.claim("w", 1, 100, True, 30)
    assert store.fail(j.id, c1.claim, "worker_lost", "worker w process lost") is JobStatus.QUEUED
    (c2,) = store.claim("w", 1, 100, True, 30)
    assert c2.attempts == 2 and c2.claim != c1.claim
    assert store.fail(j.id, c1.claim, "worker_lost", "stale claim") is None  # a lapsed claim has no say
    assert store.fail(j.id, c2.claim, "worker_lost", "worker w process lost") is JobStatus.FAILED
    failed = store.get(j.id)
    assert failed.status is JobStatus.FAILED and failed.error_class == "worker_lost"
    assert "attempt 2 of 2" in failed.error


def test_stale_claim_cannot_overwrite(store):
    ((j, _),) = store.submit([_job(1)])
    (c1,) = store.claim("w", 1, 100, True, lease_s=0.01)
    time.sleep(0.05)
    assert store.reap_expired() == {j.id: JobStatus.QUEUED}
    (c2,) = store.claim("w2", 1, 100, True, 30)
    assert not store.complete(j.id, c1.claim, '{"status": "late"}', None).current
    assert store.get(j.id).status is JobStatus.RUNNING  # the newer claim still holds it
    assert store.complete(j.id, c2.claim, '{"status": "correct"}', None).current
    assert store.get(j.id).result_json == '{"status": "correct"}'


def test_heartbeat_keeps_lease(store):
    ((j, _),) = store.submit([_job(1)])
    # a beat moves the lease's end: the claim outlives its first lease (a 30 s margin a slow host
    # never reaches; the sleep only has to outlast the first lease's 0.05 s)
    (c,) = store.claim("w", 1, 100, True, lease_s=0.05)
    store.heartbeat([(c.id, c.claim)], lease_s=30)
    time.sleep(0.1)
    assert store.reap_expired() == {}
    store.heartbeat([(c.id, c.claim)], lease_s=0.01)  # and a short beat lets it lapse
    time.sleep(0.05)
    assert store.reap_expired() == {c.id: JobStatus.QUEUED}


def test_restart_recovers_running_jobs_without_counting_and_release_does_not_count(tmp_path):
    path = tmp_path / "r.sqlite"
    s = JobStore(path)
    ids = [j.id for j, _ in s.submit([_job(i) for i in range(3)])]
    a, b = s.claim("w", 2, 100, True, 30)
    assert s.release([(b.id, b.claim)]) == 1
    s.close()  # the server "dies" with job a running
    s2 = JobStore(path)
    assert s2.recover() == [a.id]
    assert s2.get(a.id).attempts == 0 and s2.get(a.id).error_class == "server_restart"
    assert s2.get(b.id).attempts == 0
    assert s2.counts()["queued"] == 3
    assert sorted(j.id for j in s2.claim("w", 3, 100, False, 30)) == sorted(ids)


def test_repeated_restarts_never_fail_a_job(tmp_path):
    path = tmp_path / "r.sqlite"
    ((j, _),) = JobStore(path).submit([_job(1)])
    for _ in range(4):
        s = JobStore(path)
        s.recover()
        (c,) = s.claim("w", 1, 100, True, 30)
        assert c.id == j.id and c.attempts == 1
        s.close()


def test_cancel(store):
    (q, _), (r, _) = store.submit([_job(1), _job(2)])
    (running,) = store.claim("w", 1, 100, True, 30)
    queued = q.id if running.id != q.id else r.id
    first = store.cancel(queued)
    assert first.job.status is JobStatus.CANCELLED and first.now
    again = store.cancel(queued)  # already cancelled: the job as it stands, and no change made
    assert again.job.status is JobStatus.CANCELLED and not again.now
    assert store.cancel(running.id).now
    assert not store.complete(running.id, running.claim, "{}", None).current
    assert store.get(running.id).status is JobStatus.CANCELLED
    assert store.cancel("nope") == Cancel(None, False)
    assert store.cancel(running.id, client="someone else") == Cancel(None, False)


def _claimer(path: str, worker: str, out) -> None:
    s = JobStore(path)
    got = []
    while True:
        jobs = s.claim(worker, 3, 10**9, True, 30)
        if not jobs:
            break
        for j in jobs:
            s.complete(j.id, j.claim, "{}", None)
            got.append(j.id)
    out.put(got)


def test_concurrent_claims_from_processes_never_share_a_job(tmp_path):
    path = str(tmp_path / "c.sqlite")
    s = JobStore(path)
    ids = {j.id for j, _ in s.submit([_job(i) for i in range(300)])}
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_claimer, args=(path, f"w{i}", out)) for i in range(4)]
    for p in procs:
        p.start()
    claimed = [j for _ in procs for j in out.get(timeout=60)]
    for p in procs:
        p.join()
    assert len(claimed) == len(set(claimed)) == 300 and set(claimed) == ids
    assert s.counts()["done"] == 300


def test_a_retry_is_claimed_alone_by_an_idle_worker_and_a_busy_one_drains_for_it(store):
    """Hostile round 13 (A01): a busy worker used to skip a retry and claim the jobs behind it, so a
    client that always kept a job in flight held another's retry back as long as it submitted. Now a
    busy worker claims nothing past a retry whose turn it is; once idle, it claims the retry alone."""
    ((j, _),) = store.submit([_client_job(1, "alice")])
    (c,) = store.claim("w", 1, 100, True, 30)
    store.fail(j.id, c.claim, "worker_lost", "lost")
    store.submit([_client_job(i, "mallory", priority=10) for i in (2, 3, 4)])
    (m,) = store.claim("w", 1, 100, idle=True, lease_s=30)  # mallory, never served, first; one in flight
    assert m.client == "mallory"
    assert store.claim("w", 3, 100, idle=False, lease_s=30) == []  # alice's turn: the worker drains
    store.complete(m.id, m.claim, "{}", None)
    alone = store.claim("w", 3, 100, idle=True, lease_s=30)
    assert [a.id for a in alone] == [j.id] and alone[0].attempts == 2
    rest = store.claim("w", 3, 100, idle=False, lease_s=30)  # mallory's come after it
    assert len(rest) == 2 and {r.client for r in rest} == {"mallory"}


def test_clients_tokens_hashed_unique_and_replaceable(tmp_path):
    from drkernel.service.store import JobStore, token_hash

    store = JobStore(tmp_path / "c.sqlite")
    token = store.add_client("alice")
    assert store.client_for(token) == "alice" and store.client_for(token + "x") is None
    with pytest.raises(ValueError, match="exists"):
        store.add_client("alice")
    with pytest.raises(ValueError):
        store.add_client("../alice")
    store.add_client_token("default", "first-token")
    store.add_client_token("default", "second-token", replace=True)
    assert store.client_for("first-token") is None and store.client_for("second-token") == "default"
    with pytest.raises(ValueError):  # one token, one client
        store.add_client_token("bob", "second-token")
    assert token_hash(token) != token and store.remove_client("alice") and store.client_for(token) is None
    store.close()


def _client_job(n: int, client: str, priority: int = 0) -> NewJob:
    return NewJob(request_json=f'{{"request_id": "{client}{n}"}}', req_hash=f"{client}{n}", est_bytes=1,
                  priority=priority, client=client)


def test_claims_are_fair_across_clients_and_priority_orders_only_ones_own(store):
    """a queues a1..a3 at priority 100, then b1 at -100 and b2 at 0. One claim at a time, each
    finished before the next: neither client served yet, a's oldest job first (a1); then b, served
    less recently than a, with its own higher priority first (b2); then a2, b1, a3 alternating."""
    store.submit([_client_job(i, "a", 100) for i in (1, 2, 3)])
    store.submit([_client_job(1, "b", -100), _client_job(2, "b", 0)])
    order = []
    for _ in range(5):
        (job,) = store.claim("w", 1, 10, idle=True, lease_s=30)
        order.append(job.request_json)
        assert store.complete(job.id, job.claim, "{}", None).current
    assert [o.split('"')[3] for o in order] == ["a1", "b2", "a2", "b1", "a3"]


def test_a_quota_bounds_jobs_and_bytes_per_client(store):
    from drkernel.service.store import Quota, QuotaExceeded

    quota = Quota(max_active=2, max_bytes=10_000)
    store.submit([_client_job(1, "a"), _client_job(2, "a")], quota)
    with pytest.raises(QuotaExceeded, match="max_queued_per_client=2"):
        store.submit([_client_job(3, "a")], quota)
    store.submit([_client_job(1, "b")], quota)  # another client's quota is its own
    big = NewJob(request_json="x" * 20_000, req_hash="big", est_bytes=1, client="c")
    with pytest.raises(QuotaExceeded, match="max_stored_bytes_per_client"):
        store.submit([big], quota)


def test_waiting_clients_are_those_a_worker_could_serve_now(store):
    # alice: one queued job whose duplicate runs (not claimable) and one retry (claimed alone, by an
    # idle worker: not counted); bob: two claimable jobs, the smaller 5 bytes; carol: only running.
    def mine(n, client, est=10, req=None):
        return NewJob(request_json=f'{{"n": {n}}}', req_hash=req or f"h{n}", est_bytes=est, client=client)

    store.submit([mine(1, "carol", req="dup"), mine(2, "alice", req="dup")])
    store.claim("w0", 1, budget_bytes=100, idle=True, lease_s=30)  # carol's (oldest) runs
    ((retry, _),) = store.submit([mine(3, "alice")])
    (held,) = store.claim("w0", 1, budget_bytes=100, idle=True, lease_s=30)
    assert held.id == retry.id and store.fail(held.id, held.claim, "worker_lost", "gone") is JobStatus.QUEUED
    store.submit([mine(4, "bob", est=5), mine(5, "bob", est=50)])
    assert store.waiting_clients() == {"bob": 5}


def test_a_batch_is_staged_until_its_last_chunk_and_a_crash_meanwhile_leaves_nothing(tmp_path):
    """A batch past one chunk is written staged and published in one transaction: a worker claims none
    of a half-written batch, and the next server's `recover` deletes what a server that died while
    writing it had staged (before, 256 of 4,096 jobs were queued and run with ids known to nobody)."""
    s = JobStore(tmp_path / "jobs.sqlite")
    chunk = [_job(i) for i in range(SUBMIT_CHUNK)]
    staged = s._tx(s._submit, chunk, None, [_job(SUBMIT_CHUNK)], True)  # the first chunk, then "kill -9"
    assert len(staged) == SUBMIT_CHUNK and all(created for _, created in staged)
    assert s.claim("w", 5, 1000, True, 30) == [] and s.counts()["queued"] == 0
    assert s.get(staged[0][0]) is None  # no route shows a staged job
    s.close()
    again = JobStore(tmp_path / "jobs.sqlite")
    again.recover()
    assert again._read(lambda db: db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]) == 0
    again.close()


def test_a_batch_of_several_chunks_is_published_whole_in_order_with_its_cache_hits_done(store):
    ((first, _),) = store.submit([_job(0)])
    (c,) = store.claim("w", 1, 100, True, 30)
    store.complete(c.id, c.claim, '{"status": "correct"}', cache_key="content-0")
    batch = [_job(i) for i in range(1, 2 * SUBMIT_CHUNK + 2)] + [_job(7777, cache_keys=["content-0"])]
    out = store.submit(batch)
    assert [j.req_hash for j, _ in out] == [f"h{i}" for i in range(1, 2 * SUBMIT_CHUNK + 2)] + ["h7777"]
    assert all(created for _, created in out)
    assert [j.status for j, _ in out[:-1]] == [JobStatus.QUEUED] * (2 * SUBMIT_CHUNK + 1)
    assert out[-1][0].status is JobStatus.DONE and out[-1][0].cached
    assert store.counts()["queued"] == 2 * SUBMIT_CHUNK + 1


@pytest.mark.parametrize("client, free, owed, allowed", [
    ("alice", 1, {"alice": 1}, True),               # her own kept slot
    ("mallory", 1, {"alice": 1}, False),            # the one free slot is alice's
    ("mallory", 2, {"alice": 1}, True),             # a slot beyond the one kept
    ("mallory", 2, {"alice": 1, "bob": 1}, False),  # both free slots are kept
    ("mallory", 1, {"alice": 0}, True),             # alice's slot already taken (spent)
    ("mallory", 1, {}, True),                       # nothing kept: anyone
])
def test_a_kept_slot_worked_cases(client, free, owed, allowed):
    assert may_take(client, free, owed) is allowed


def test_a_claim_keeps_owed_slots_for_their_clients(store):
    """Hostile round 14: alice's slot kept (owed 1): mallory's queued jobs take only the slot beyond it,
    whatever their priority, and alice's job, when it comes, takes hers; a retry of mallory's is
    skipped like her other jobs, not drained for. Nothing owed: the claim is as before."""
    store.submit([_client_job(i, "mallory", priority=100) for i in range(3)])
    got = store.claim("w", 2, 100, idle=True, lease_s=30, owed={"alice": 1})
    assert [j.client for j in got] == ["mallory"]
    assert store.claim("w", 1, 100, idle=False, lease_s=30, owed={"alice": 1}) == []
    store.submit([_client_job(9, "alice")])
    (mine,) = store.claim("w", 1, 100, idle=False, lease_s=30, owed={"alice": 1})
    assert mine.client == "alice"
    store.fail(got[0].id, got[0].claim, "worker_lost", "lost")  # mallory's job: a retry now
    store.submit([_client_job(10, "alice")])
    (again,) = store.claim("w", 1, 100, idle=False, lease_s=30, owed={"alice": 1})  # past mallory's retry
    assert again.client == "alice"
    assert store.claim("w", 2, 100, idle=False, lease_s=30) == []  # nothing owed: drains for the retry
