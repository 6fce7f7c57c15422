"""Faults: kill -9 a worker mid-job, a solution that kills its worker, a device that fails its
canary, kill -9 the server mid-batch and restart it. Every accepted job reaches a terminal state."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest
from service_server import DIRECTIVE, TOKEN, ServerProcess

from drkernel.gym.config import EvalRequest
from drkernel.errors import ServiceError
from drkernel.service.client import ServiceClient
from drkernel.service.store import JobStore


def _wait_for(pred, timeout_s: float = 30.0, every: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not met in time")


@pytest.fixture
def one_worker(tmp_path):
    srv = ServerProcess(
        tmp_path / "jobs.sqlite",
        "--devices",
        "cpu:1",
        "--evaluator",
        DIRECTIVE,
        "--token",
        TOKEN,
        "--evaluator-kwargs",
        f'{{"broken_marker": "{tmp_path / "broken"}"}}',
        "--lease-s",
        "3",
    )
    srv.start()
    yield srv
    srv.stop()


def test_kill9_worker_mid_job_requeues_and_restarts(one_worker, small_problem):
    with ServiceClient(one_worker.url, TOKEN) as c:
        ids = c.submit_batch(
            [EvalRequest(small_problem, f"class ModelNew: pass\n# sleep: 0.6\n# k{i}") for i in range(4)]
        )
        (pid,) = [w["pid"] for w in c.workers()]
        _wait_for(lambda: c.job(ids[0]).status == "running")
        os.kill(pid, signal.SIGKILL)
        infos = c.collect(ids, timeout_s=60)
        assert all(infos[i].status == "done" and infos[i].result.correct for i in ids)
        assert max(infos[i].attempts for i in ids) == 2  # the killed jobs ran again, once
        (worker,) = c.workers()
        assert worker["state"] == "ready" and worker["restarts"] == 1 and worker["pid"] != pid
        assert (
            'kernelgym_errors_total{error_class="worker_lost"}'
            in httpx.get(f"{one_worker.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
        )


def test_solution_that_keeps_killing_its_worker_fails_after_two_attempts(one_worker, small_problem):
    with ServiceClient(one_worker.url, TOKEN) as c:
        bad = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# die"))
        good = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# fine"))
        infos = c.collect([bad, good], timeout_s=60)
        assert infos[bad].status == "failed" and infos[bad].error_class == "worker_lost"
        assert "exit code 17" in infos[bad].error and infos[bad].attempts == 2
        assert infos[good].status == "done"
        # the bad job's last death may come after the good job ran: the worker is then still restarting
        _wait_for(lambda: c.workers()[0]["state"] == "ready", timeout_s=60)


def _dead(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def test_idle_worker_killed_is_noticed_and_costs_no_attempt(one_worker, small_problem):
    """A worker killed while idle is restarted by the watchdog (not by the next job), and a job sent
    in the meantime goes back to the queue uncounted."""
    with ServiceClient(one_worker.url, TOKEN) as c:
        (pid,) = [w["pid"] for w in c.workers()]
        os.kill(pid, signal.SIGKILL)
        _wait_for(lambda: _dead(pid))  # dead (a zombie at most) before the job is sent
        job = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# after idle kill"))
        info = c.collect([job], timeout_s=60)[job]
        assert info.status == "done" and info.attempts == 1
        worker = _wait_for(lambda: next((w for w in c.workers() if w["state"] == "ready"), None))
        assert worker["pid"] != pid and worker["restarts"] >= 1
        (pid,) = [w["pid"] for w in c.workers()]
        os.kill(pid, signal.SIGKILL)  # idle, and no job follows: noticed all the same
        _wait_for(lambda: c.workers()[0]["pid"] not in (pid, None) and c.workers()[0]["state"] == "ready")


def test_health_does_not_flap_after_crash_results(one_worker, small_problem):
    """A crash result sends the worker to a canary check: routine, so health stays up meanwhile."""
    with ServiceClient(one_worker.url, TOKEN) as c:
        ids = [c.submit(EvalRequest(small_problem, f"class ModelNew: pass\n# status: crashed\n# f{i}"))
               for i in range(3)]
        seen = []
        while not all(c.job(i).terminal for i in ids):
            seen.append(httpx.get(f"{one_worker.url}/v1/health").status_code)
        for _ in range(20):
            seen.append(httpx.get(f"{one_worker.url}/v1/health").status_code)
            time.sleep(0.05)
        assert set(seen) == {200}


def test_failed_canary_takes_the_device_out_of_service(one_worker, small_problem, tmp_path):
    with ServiceClient(one_worker.url, TOKEN) as c:
        (tmp_path / "broken").touch()  # from now on the device computes garbage
        crashed = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# status: crashed"))
        assert c.collect([crashed], timeout_s=30)[crashed].result.status.value == "crashed"
        worker = _wait_for(lambda: next((w for w in c.workers() if w["state"] == "out_of_service"), None))
        assert "canary came back incorrect" in worker["reason"]
        assert c.health()["status"] == "down"
        assert httpx.get(f"{one_worker.url}/v1/health").status_code == 503  # a balancer sees it
        queued = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# waits"))
        time.sleep(1.0)
        assert c.job(queued).status == "queued"  # not lost, not run on a bad device


def test_kill9_server_mid_batch_and_restart(tmp_path, small_problem):
    """Two tenants, each half of the batch: after kill -9 and a restart, each collects its own."""
    db = tmp_path / "jobs.sqlite"
    args = ("--devices", "cpu:2", "--evaluator", DIRECTIVE, "--token", TOKEN, "--lease-s", "3")
    store = JobStore(db)
    other = store.add_client("tenant-b")
    store.close()
    srv = ServerProcess(db, *args).start()
    reqs = [EvalRequest(small_problem, f"class ModelNew: pass\n# sleep: 0.15\n# s{i}") for i in range(40)]
    try:
        with ServiceClient(srv.url, TOKEN) as c, ServiceClient(srv.url, other) as b:
            ids = c.submit_batch(reqs[:20])
            ids_b = b.submit_batch(reqs[20:])
            _wait_for(lambda: c.queue()["counts"]["done"] >= 5)
            srv.kill9()
            srv2 = ServerProcess(db, *args, port=srv.port).start()
            try:
                infos_b = b.collect(ids_b, timeout_s=90)
                assert all(infos_b[i].status == "done" for i in ids_b)
                for client, theirs in ((c, ids_b), (b, ids)):  # another tenant's jobs stay invisible
                    with pytest.raises(ServiceError, match="does not know"):
                        client.wait_many(theirs[:3], timeout_s=0)
                infos = {**c.collect(ids, timeout_s=90), **infos_b}
                ids = ids + ids_b
                assert len(infos) == 40 and all(i.status == "done" for i in infos.values())
                assert [infos[i].result.solution_hash for i in ids] == [
                    infos[i].result.solution_hash for i in ids
                ]
                assert {infos[i].result.request_id for i in ids} == {""}
                assert c.queue()["counts"] == {
                    "queued": 0,
                    "running": 0,
                    "done": 40,
                    "failed": 0,
                    "cancelled": 0,
                }
                metrics = httpx.get(
                    f"{srv2.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
                ).text
                assert (
                    'kernelgym_errors_total{error_class="server_restart"}' in metrics
                )  # jobs were interrupted
                assert all(
                    i.attempts == 1 for i in infos.values()
                )  # and their interrupted attempt not counted
            finally:
                srv2.stop()
    finally:
        srv.stop()


def test_hung_worker_is_killed_and_the_job_fails_after_two_attempts(tmp_path, small_problem):
    srv = ServerProcess(
        tmp_path / "jobs.sqlite",
        "--devices",
        "cpu:1",
        "--evaluator",
        DIRECTIVE,
        "--token",
        TOKEN,
        "--job-timeout-grace-s",
        "0.5",
    ).start()
    try:
        with ServiceClient(srv.url, TOKEN) as c:
            (pid,) = [w["pid"] for w in c.workers()]
            config = EvalRequest(small_problem, "").config.replace(timeout_s=0.5)
            hung = c.submit(EvalRequest(small_problem, "class ModelNew: pass\n# hang: 30", config))
            info = c.collect([hung], timeout_s=60)[hung]
            assert info.status == "failed" and info.error_class == "worker_hung" and info.attempts == 2
            worker = _wait_for(lambda: next((w for w in c.workers() if w["state"] == "ready"), None), 120)
            assert worker["pid"] != pid and worker["restarts"] == 2
    finally:
        srv.stop()
