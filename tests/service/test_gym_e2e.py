"""End to end with the real gym: a server whose CPU interpreter workers run `InProcessEvaluator`,
real Triton solutions, results compared with direct in-process evaluation; and the small version
of the load benchmark (300 jobs, 5 clients)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest
from service_server import ServerProcess

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.service.client import ServiceClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from service_load import comparable, direct_evaluations, problems, run_clients, solution, verify  # noqa: E402


@pytest.fixture(scope="module")
def pool():
    """Four real Triton solutions with four different verdicts."""
    probs, config = problems(), EvalConfig(device="cpu", trials=2, second_size=False)
    picks = [
        ("add", "correct"),
        ("mul", "wrong"),
        ("add_relu", "syntax_error"),
        ("scaled_sub", "no_modelnew"),
    ]
    return [EvalRequest(probs[op], solution(op, kind, 128, i), config) for i, (op, kind) in enumerate(picks)]


@pytest.fixture(scope="module")
def direct(pool):
    return direct_evaluations(pool)


@pytest.fixture(scope="module")
def gym_server(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("gym") / "jobs.sqlite", "--devices", "cpu:1").start(
        timeout_s=300
    )
    yield srv
    srv.stop()


def test_default_worker_is_the_real_gym(gym_server):
    with ServiceClient(gym_server.url) as c:
        (worker,) = c.workers()
        assert worker["device_name"] == "cpu (triton interpreter)" and worker["state"] == "ready"


def test_real_solutions_match_direct_evaluation(gym_server, pool, direct):
    assert sorted(d["status"] for d in direct.values()) == [
        "correct",
        "incorrect",
        "no_modelnew",
        "syntax_error",
    ]
    with ServiceClient(gym_server.url) as c:
        results = c.evaluate_many(pool)
        assert [comparable(r) for r in results] == [direct[r.solution_hash] for r in results]
        again = c.submit_batch(pool)
        assert all(c.job(i).cached for i in again)  # a duplicate costs nothing


def test_small_load(gym_server, pool, direct):
    """Two tenants (the server's token and one added while it runs), five client threads."""
    from drkernel.service.store import JobStore

    store = JobStore(gym_server.db)
    try:
        second = store.add_client("tenant-b")
    finally:
        store.close()
    run = run_clients(gym_server.url, [gym_server.token, second], pool, jobs=300, clients=5, seed=1)
    check = verify(run, pool, direct, jobs=300)
    assert check["lost"] == check["duplicated_ids"] == check["mismatches"] == 0 and check["submitted"] == 300


def _tagged(tag: str | None = None) -> dict[int, str]:
    """pid -> worker tag of every process carrying a worker tag (``tag``: only that one)."""
    from drkernel.service.workers import WORKER_TAG_ENV

    out = {}
    for p in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            env = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(WORKER_TAG_ENV.encode() + b"="):
                value = item.split(b"=", 1)[1].decode()
                if tag is None or value == tag:
                    out[int(p)] = value
    return out


def _cpu_ticks(pids) -> int:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime + stime
    return total


def _spinning(c: ServiceClient, worker_pid: int) -> tuple[str, str, set[int]]:
    """Submit a candidate that spins forever; returns its job id, its worker's tag and the tagged
    pids once something tagged burns CPU."""
    probs = problems()
    spin = solution("add", "correct", 128, 99).replace(
        "out = torch.empty_like(x)", "while True:\n            pass"
    )
    job = c.submit(EvalRequest(probs["add"], spin, EvalConfig(device="cpu", trials=1, timeout_s=300)))
    tags = {t for pid, t in _tagged().items() if Path(f"/proc/{pid}/stat").exists()
            and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(worker_pid)}
    assert len(tags) == 1, tags
    (tag,) = tags

    def burning():
        """The tagged processes that want the CPU all along now (the spinning candidate): runnable in
        every one of several looks and burning ticks, however loaded the machine is."""
        pids = set(_tagged(tag)) - {worker_pid}
        before = {p: _cpu_ticks([p]) for p in pids}
        runnable = set(pids)
        for _ in range(5):
            runnable &= {p for p in pids if _state(p) == "R"}
            time.sleep(0.1)
        hot = {p for p in runnable if _cpu_ticks([p]) > before[p]}
        return hot or None

    return job, tag, _wait_for(burning, 120)


def _wait_for(pred, timeout_s: float):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


def _state(pid: int) -> str:
    """The process's scheduler state (``R`` runnable, ``S`` sleeping, ...), ``-`` once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "-"


def _quiet(pids: set[int]) -> bool:
    """The given processes are gone or not runnable in any of several looks (a refilling warm pool may
    burn CPU meanwhile: it is not the cancelled candidate)."""
    for _ in range(5):
        if any(_state(p) == "R" for p in pids):
            return False
        time.sleep(0.1)
    return True


def test_cancel_kills_the_running_candidate(gym_server):
    with ServiceClient(gym_server.url) as c:
        (worker,) = c.workers()
        job, _, spinning = _spinning(c, worker["pid"])
        assert c.cancel(job).status == "cancelled"
        _wait_for(lambda: _quiet(spinning), 120)  # the cancelled candidate burns no CPU any more
        assert c.workers()[0]["pid"] == worker["pid"]  # the worker itself lives on


def test_candidates_die_with_their_worker(gym_server):
    with ServiceClient(gym_server.url) as c:
        (worker,) = c.workers()
        job, tag, _ = _spinning(c, worker["pid"])
        os.kill(worker["pid"], signal.SIGKILL)
        _wait_for(lambda: not _tagged(tag), 120)  # no orphan of the dead worker is left
        c.cancel(job)
        _wait_for(lambda: c.workers()[0]["state"] == "ready", 120)
