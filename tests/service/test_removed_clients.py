"""A removed client (`drkernel.service.store.JobStore.remove_client`): its submissions are refused in
the transaction that would store them, whatever a server still remembers of its token
(`gate.TokenCache` keeps a verified token ``token_ttl_s``), until the name is registered again; a
client registered again under the name sees none of the old client's jobs. On the store, and on a
real server whose client is removed by `drkernel gym token remove` while its token is cached."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import httpx
import pytest
from service_server import DIRECTIVE, SRC, ServerProcess

from drkernel.gym.config import EvalRequest
from drkernel.service.store import ClientRemoved, JobStatus, JobStore, NewJob


def _job(n: int, client: str) -> NewJob:
    return NewJob(request_json=f'{{"n": {n}}}', req_hash=f"h{n}", est_bytes=1, client=client, idem_key="k")


def test_a_removed_client_cannot_submit_until_registered_again(tmp_path):
    store = JobStore(tmp_path / "jobs.sqlite")
    try:
        store.add_client("dave")
        ((old, _),) = store.submit([_job(1, "dave")])
        assert store.remove_client("dave")
        assert store.get(old.id).status is JobStatus.CANCELLED
        for refused in (store.precheck, store.submit):  # what a server that still trusts the token does
            with pytest.raises(ClientRemoved):
                refused([_job(2, "dave")])
        assert store.get(old.id, "dave") is None
        store.add_client("dave")  # a new client of that name: its own jobs only, its own idempotency keys
        ((new, created),) = store.submit([_job(1, "dave")])
        assert created and new.id != old.id and store.get(old.id, "dave") is None
        store.submit([_job(3, "erin")])  # a client never removed is not affected
    finally:
        store.close()


def _drkernel(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "drkernel", "gym", *args], capture_output=True, text=True,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}, timeout=120, check=False)


def test_a_removed_clients_cached_token_submits_nothing(tmp_path, small_problem):
    """dave's token is verified (cached by the server), dave is removed from another process: his
    next submission is a 401 (from the store if the token is still cached, else from the gate) and
    stores nothing; his running job is cancelled; dave registered again reads none of it."""
    db = tmp_path / "jobs.sqlite"
    out = _drkernel("token", "add", "dave", "--db", str(db))
    assert out.returncode == 0, out.stderr
    token = out.stdout.strip()
    srv = ServerProcess(db, "--devices", "cpu:1", "--evaluator", DIRECTIVE).start()
    try:
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as dave:
            body = {**EvalRequest(small_problem, "class ModelNew: pass\n# sleep: 30").to_dict(),
                    "problem_key": small_problem.key}
            first = dave.post("/v1/jobs", json=body)
            assert first.status_code == 202, first.text
            assert _drkernel("token", "remove", "dave", "--db", str(db)).returncode == 0
            after = dave.post("/v1/jobs", json={**body, "request_id": "after removal"})
            assert after.status_code == 401, after.text
        with sqlite3.connect(db) as conn:  # the one job stored, cancelled with the removal
            assert [r[0] for r in conn.execute("SELECT status FROM jobs")] == ["cancelled"]
        out = _drkernel("token", "add", "dave", "--db", str(db))
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {out.stdout.strip()}"},
                          timeout=30) as new_dave:
            assert new_dave.get(f"/v1/jobs/{first.json()['id']}").status_code == 404
    finally:
        srv.stop()
