"""Nothing of an evaluation outlives what ended it: a real server on loopback whose one CPU worker
(two slots) runs the real gym in its sandbox. A cancel stops a custom reference still running in its
own judge, and frees the slot for another client's job; a server killed -9 takes its worker, the
worker's judges and candidates, and what a request's code started in them, along within seconds.

The request code below marks a process it starts (a sleep whose command line carries a random tag),
so the test finds it from the host whatever namespaces the sandbox puts it in."""

from __future__ import annotations

import os
import secrets
import signal
import time

import httpx
import pytest
from service_server import SMALL_REFERENCE, ServerProcess

from drkernel.gym.orchestrator.pool import descendants
from drkernel.service.store import JobStore

HOST_MEMORY = 2 << 30  # 1 GiB a slot: the reference's own judge gets 512 MiB
GOLD = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x * 2\n"
GONE_S = 30.0  # bound on the teardown of a killed tree (SIGKILL, then the kernel reaps)


def _stuck_reference(mark: str) -> str:
    """A custom reference that starts a marked process in its judge, then sleeps as it loads: the
    evaluation stays in its reference stage until its timeout_s unless something stops it."""
    return ("import subprocess as _sp, sys as _sys, time as _time\n"
            f"_sp.Popen([_sys.executable, '-c', 'import time; time.sleep(600)  # {mark}'])\n"
            "_time.sleep(600)\n" + SMALL_REFERENCE)


def _job(solution: str, code: str = SMALL_REFERENCE, name: str = "double", **config) -> dict:
    problem = {"name": name, "level": 1, "code": code, "source": "test"}
    return {"problem": problem, "solution": solution, "config": {"device": "cpu", "trials": 1, **config}}


def _marked(mark: str) -> list[int]:
    """Host pids of the live processes whose command line carries ``mark`` (zombies have none)."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    """Runs (a zombie, dead and awaiting its reaper, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _until(pred, timeout_s: float, what) -> None:
    """Poll ``pred`` until it holds; fail naming ``what()`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < deadline, what()
        time.sleep(0.2)


def _server(tmp_path, *args: str) -> ServerProcess:
    return ServerProcess(tmp_path / "jobs.sqlite", "--devices", "cpu:1", "--slots", "2",
                         "--host-memory-bytes", str(HOST_MEMORY), *args)


def _client(srv: ServerProcess, token: str | None = None) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token or srv.token}"}, timeout=300)


def test_cancelling_jobs_stops_their_references_and_frees_the_slots_for_another_client(tmp_path):
    """Two jobs whose custom references sleep (timeout_s 600) take both slots; once both references
    run, both are cancelled: their own judges (and what the references started there) are gone,
    the worker has no job in flight, and another client's job runs at once, not after 600 s."""
    store = JobStore(tmp_path / "jobs.sqlite")
    other = store.add_client("tenant-b")
    store.close()
    srv = _server(tmp_path).start(timeout_s=300)
    marks = [f"stuck-{secrets.token_hex(6)}" for _ in range(2)]
    try:
        with _client(srv) as a, _client(srv, other) as b:
            ids = [a.post("/v1/jobs", json=_job(GOLD, code=_stuck_reference(m), name=f"stuck{i}",
                                                timeout_s=600)).json()["id"] for i, m in enumerate(marks)]
            _until(lambda: all(_marked(m) for m in marks), 180, lambda: [a.get(f"/v1/jobs/{i}").json() for i in ids])
            assert [a.delete(f"/v1/jobs/{i}").json()["status"] for i in ids] == ["cancelled"] * 2
            _until(lambda: not any(_marked(m) for m in marks), GONE_S,
                   lambda: f"the cancelled references' processes still run: {[_marked(m) for m in marks]}")
            _until(lambda: b.get("/v1/workers").json()[0]["in_flight"] == 0, GONE_S,
                   lambda: f"slots still taken: {b.get('/v1/workers').json()}")
            job = b.post("/v1/jobs", json=_job(GOLD, name="beside")).json()["id"]
            out = b.get(f"/v1/jobs/{job}/wait?timeout=120").json()
            assert (out["status"], out["result"]["status"]) == ("done", "correct"), out
            assert b.get("/v1/workers").json()[0]["restarts"] == 0  # stopped by the cancel, not a watchdog
    finally:
        srv.stop()
        _kill_marked(marks)


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_a_server_killed_9_takes_its_worker_judges_and_candidates_along(tmp_path, sandbox):
    """A job whose custom reference sleeps in its own judge runs; kill -9 the server alone: the
    worker (not in the server's session cleanup: only the server is signalled) and every process
    below it (judges, warm candidates, the bwrap around them) are gone within `GONE_S`, not when
    the job's timeout_s (600 s) ends; in the sandbox, so is what the reference started (its pid
    namespace ends with it). Unsandboxed, a process the request's code starts itself has no such
    namespace, so there the reference only tells it sleeps (a file: it shares our file system)."""
    srv = _server(tmp_path, *(["--unsafe-no-sandbox"] if sandbox == "none" else [])).start(timeout_s=300)
    mark = f"orphan-{secrets.token_hex(6)}"
    sleeping = tmp_path / "sleeping"
    code = (_stuck_reference(mark) if sandbox == "bwrap" else
            f"import time\nopen({str(sleeping)!r}, 'w').close()\ntime.sleep(600)\n" + SMALL_REFERENCE)
    tree: list[int] = []
    try:
        with _client(srv) as a:
            job = a.post("/v1/jobs", json=_job(GOLD, code=code, name="orphan", timeout_s=600)).json()["id"]
            if sandbox == "bwrap":
                _until(lambda: _marked(mark), 180, lambda: a.get(f"/v1/jobs/{job}").json())
            else:
                _until(sleeping.exists, 180, lambda: a.get(f"/v1/jobs/{job}").json())
            (worker,) = a.get("/v1/workers").json()
        tree += [worker["pid"], *descendants(worker["pid"])]
        assert len(tree) > 3 and set(_marked(mark)) <= set(tree), (tree, _marked(mark))
        srv.kill9()
        _until(lambda: not any(_alive(p) for p in tree), GONE_S,
               lambda: f"still alive after the server's kill -9: {[p for p in tree if _alive(p)]}")
        assert not _marked(mark)
    finally:
        srv.stop()
        _kill([p for p in tree if _alive(p)])  # a failure's survivors, seen as this server's


def _kill_marked(marks: list[str]) -> None:
    """What a failing test's references left running (started by this test, found by their marks)."""
    _kill([p for m in marks for p in _marked(m)])


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
