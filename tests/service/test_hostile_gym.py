"""The service under hostile clients, where the defence is the gym's: a real server on loopback
whose one CPU worker (two slots, 2 GiB of host memory for request code: 1 GiB a slot) runs the real
gym in its sandbox. What a request's code holds of the host (memory, resident or in its tmpfs; CPU
share) is bounded per evaluation, whatever the request asks."""

from __future__ import annotations

import os
import secrets
import time

import httpx
import pytest
from service_server import SMALL_REFERENCE, ServerProcess

from drkernel.gym.cuda.build import BUILD_BYTES
from drkernel.gym.orchestrator.cpushare import IDLE_CGROUP, idle_cgroup

HOG = ("import subprocess as _sp, sys as _sys\n"
       "_hogs = [_sp.Popen([_sys.executable, '-c', 'while True: pass  # {mark}']) for _ in range(4)]\n")


HOST_MEMORY = 2 << 30
SLOT_MEMORY = HOST_MEMORY // 2
FORWARD = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n{body}        return x * 2\n"
GOLD = FORWARD.format(body="")


def _holding(mb: int, indent: str = "") -> str:
    """Lines that make the process they run in hold ``mb`` MiB more (written, so resident) and keep
    writing it: only a kill ends them before the job's timeout (no race with the watch's sampling)."""
    return "".join(f"{indent}{line}\n" for line in (
        "import torch as _t", f"_held = _t.ones({mb} << 18)", "while True:", "    _held.add_(1)"))


@pytest.fixture(scope="module")
def gym(tmp_path_factory):
    srv = ServerProcess(tmp_path_factory.mktemp("gym-hostile") / "jobs.sqlite", "--devices", "cpu:1",
                        "--slots", "2", "--host-memory-bytes", str(HOST_MEMORY)).start(timeout_s=300)
    yield srv
    srv.stop()


def _http(srv) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.token}"}, timeout=300)


def _job(solution: str, code: str = SMALL_REFERENCE, name: str = "double", **config) -> dict:
    problem = {"name": name, "level": 1, "code": code, "source": "test"}
    return {"problem": problem, "solution": solution, "config": {"device": "cpu", "trials": 1, **config}}


def _marked(mark: str) -> list[int]:
    """Host pids of the processes whose command line carries ``mark``."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def _idle(pid: int) -> bool:
    try:
        return os.sched_getscheduler(pid) == os.SCHED_IDLE
    except OSError:
        return False


def test_a_request_reference_cannot_hold_host_memory_in_its_tmpfs_beyond_the_limit(gym):
    """A custom reference writes 1.5 GiB into its judge's private /tmp in 8 MiB pieces (its resident
    size stays small) under rss_limit_mb=1024 (and the judge's half of the slot's share, 512 MiB):
    the memory watch counts the tmpfs and kills the judge, and the job fails as the reference's
    fault. (A candidate's tmpfs is counted by the same watch; the static contract already refuses
    the file access a solution would need.)"""
    fill = ("with open('/tmp/fill', 'wb') as _f:\n    for _ in range(192):\n"
            "        _f.write(b'\\1' * (8 << 20))\n        _f.flush()\n")
    with _http(gym) as c:
        job = c.post("/v1/jobs", json=_job("class ModelNew: pass\n# fill", code=fill + SMALL_REFERENCE,
                                           name="fillref", rss_limit_mb=1024, timeout_s=120)).json()["id"]
        out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
    assert (out["status"], out["error_class"]) == ("failed", "reference_error"), out
    assert "memory limit" in out["error"], out["error"]


def test_a_solution_holds_at_most_its_share_of_the_workers_host_memory_whatever_it_asks(gym):
    """Under the request's default rss_limit_mb (16384), a solution whose forward holds 400 MiB
    more and waits: its candidate (half the 1 GiB slot share beside the custom reference's own judge, 512 MiB)
    is killed, and the result, out_of_memory, names the limit that applied and what set it. The
    config recorded is the one asked (so its replay and cache key are unchanged). The same problem
    with a solution that holds nothing is correct (the control: the share leaves room for a plain job)."""
    hog = FORWARD.format(body=_holding(400, indent=" " * 8))
    with _http(gym) as c:
        assert [w["slot_memory_bytes"] for w in c.get("/v1/workers").json()] == [SLOT_MEMORY]
        ids = [c.post("/v1/jobs", json=_job(s + f"# {secrets.token_hex(4)}", second_size=False,
                                            timeout_s=60)).json()["id"] for s in (GOLD, hog)]
        plain, held = (c.get(f"/v1/jobs/{i}/wait?timeout=240").json() for i in ids)
    assert plain["result"]["status"] == "correct", plain
    result = held["result"]
    assert (held["status"], result["status"]) == ("done", "out_of_memory"), held
    assert f"exceeded {SLOT_MEMORY >> 21} MB" in result["error"], result["error"]
    assert any("host memory share" in w and "asked 16384 MB" in w for w in result["warnings"]), result
    assert result["config"]["rss_limit_mb"] == 16384


def test_a_custom_reference_holds_at_most_its_half_of_the_slot_share(gym):
    """A custom reference that holds 400 MiB more as it loads, and waits, under
    rss_limit_mb=32768 (the most a client may ask): its own judge is killed at 512 MiB (not at its
    60-s timeout) and the job fails as the reference's fault, naming the limit and what set it."""
    # plain bytes: resident whatever device torch builds tensors on while the judge sizes a reference
    code = "import time\n_held = b'\\1' * (400 << 20)\nwhile True:\n    time.sleep(1)\n" + SMALL_REFERENCE
    with _http(gym) as c:
        job = c.post("/v1/jobs", json=_job(GOLD, code=code, name="heldref", rss_limit_mb=32768,
                                           timeout_s=60)).json()["id"]
        out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
    assert (out["status"], out["error_class"]) == ("failed", "reference_error"), out
    assert f"memory limit ({SLOT_MEMORY >> 21} MiB: the worker's host memory share" in out["error"], out["error"]


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
def test_busy_processes_of_a_custom_reference_lose_their_cpu_priority_while_another_job_runs(gym):
    """A custom reference starts four busy processes in its judge and waits: they are moved to
    SCHED_IDLE (and into the idle cgroup where one can be made here: they take only CPU nobody else
    wants), and another job evaluates meanwhile."""
    mark = f"hog-{secrets.token_hex(6)}"
    code = HOG.format(mark=mark) + "import time\ntime.sleep(60)\n" + SMALL_REFERENCE
    with _http(gym) as c:
        hog = c.post("/v1/jobs", json=_job("class ModelNew: pass\n# hog", code=code, name="hogref",
                                           timeout_s=120)).json()["id"]
        deadline = time.monotonic() + 120
        while not (len(_marked(mark)) == 4 and all(_idle(p) for p in _marked(mark))):
            assert time.monotonic() < deadline, [(p, os.sched_getscheduler(p)) for p in _marked(mark)]
            time.sleep(0.2)
        if idle_cgroup() is not None:
            assert all(IDLE_CGROUP in open(f"/proc/{p}/cgroup").read() for p in _marked(mark))
        other = c.post("/v1/jobs", json=_job("class ModelNew: pass\n# beside the hog")).json()["id"]
        assert c.get(f"/v1/jobs/{other}/wait?timeout=240").json()["status"] == "done"
        assert c.get(f"/v1/jobs/{hog}").json()["status"] == "running"
        c.delete(f"/v1/jobs/{hog}")


def test_a_solution_too_deep_to_parse_is_its_own_result_not_our_failure(gym):
    """A 6,000-term chain passes the interpreter's recursion limit when the gym reads it: the
    solution's error (a result, one attempt), never an evaluator failure retried and canaried."""
    deep = "_deep = " + "+".join(["1"] * 6000) + "\n"
    solution = deep + ("import torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
                       "    def forward(self, x):\n        return x * 2\n")
    with _http(gym) as c:
        job = c.post("/v1/jobs", json=_job(solution, second_size=False)).json()["id"]
        out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
    assert (out["status"], out["attempts"]) == ("done", 1), out
    assert out["result"]["status"] in ("syntax_error", "import_error", "runtime_error"), out["result"]["status"]
    assert "RecursionError" in out["result"]["error"]


BOMB = ("constexpr long burn(long s){ for(long i=0;i<100;++i){ for(long j=0;j<100000;++j){ s = s*3 + (j ^ i); } }"
        " return s; }\\nconstexpr long v0 = burn(TAG);\\nlong use_burn(){ return v0; }\\n")
CUDA_SOLUTION = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
__global__ void k(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = 2 * x[i]; }
}
torch::Tensor fwd(torch::Tensor x) {
    auto xc = x.contiguous(); auto y = torch::empty_like(xc); long long n = xc.numel();
    k<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
CPP_SRC = "torch::Tensor fwd(torch::Tensor x);\\n" + "BOMB"

ext = load_inline(name="bomb_ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["fwd"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.fwd(x)
'''


def _compilers(root: int) -> list[int]:
    """Compiler processes below ``root``."""
    out = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if f.read().strip() not in ("cc1plus", "cicc", "cudafe++", "ptxas"):
                    continue
            with open(f"/proc/{pid}/status") as f:
                ppid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
        except (OSError, StopIteration):
            continue
        while ppid > 1 and ppid != root:
            try:
                with open(f"/proc/{ppid}/status") as f:
                    ppid = next(int(line.split()[1]) for line in f if line.startswith("PPid:"))
            except (OSError, StopIteration):
                break
        if ppid == root:
            out.append(int(pid))
    return out


@pytest.fixture(scope="module")
def roomy_gym(tmp_path_factory):
    """A server whose slots' shares hold a build (`BUILD_BYTES` each): a build is counted in its
    evaluation's share, and the 1 GiB of ``gym``'s would stop it before any cancel could."""
    srv = ServerProcess(tmp_path_factory.mktemp("gym-roomy") / "jobs.sqlite", "--devices", "cpu:1",
                        "--slots", "2", "--host-memory-bytes", str(2 * BUILD_BYTES)).start(timeout_s=300)
    yield srv
    srv.stop()


def test_cancelling_a_cuda_job_stops_its_build(roomy_gym):
    """A CUDA solution whose host code keeps the compiler busy for a minute or more: once its
    compiler runs, a cancel stops it (no compiler is left below the server) and frees the slot."""
    gym = roomy_gym
    solution = CUDA_SOLUTION.replace("BOMB", BOMB.replace("TAG", str(secrets.randbits(30))))
    with _http(gym) as c:
        job = c.post("/v1/jobs", json={**_job(solution), "language": "cuda"}).json()["id"]
        deadline = time.monotonic() + 120
        while not _compilers(gym.proc.pid):
            assert time.monotonic() < deadline, c.get(f"/v1/jobs/{job}").json()
            time.sleep(0.2)
        assert c.delete(f"/v1/jobs/{job}").json()["status"] == "cancelled"
        deadline = time.monotonic() + 60
        while _compilers(gym.proc.pid):
            assert time.monotonic() < deadline, "the cancelled job's compiler still runs"
            time.sleep(0.2)


def test_hostile_cuda_sources_free_their_slots_at_their_timeout(gym):
    """Two CUDA solutions of 256 KiB of ``a.b.b...`` chains with ``timeout_s`` 1 fill both slots: their
    contracts are read in the checker child, which the deadline kills, so each ends ``timeout`` in one
    attempt after its second and a kill (the error names the deadline, which only that wait raises),
    and a plain job sent after them is done. Read in the worker's thread, each held its slot 38 s."""
    line = "_x = _a" + ".b" * 100 + "\n"
    head = CUDA_SOLUTION.replace("BOMB", "")
    hostile = head + line * ((256 * 1024 - len(head) - 100) // len(line))
    with _http(gym) as c:
        ids = [c.post("/v1/jobs", json={**_job(hostile + f"# {i}\n", timeout_s=1), "language": "cuda"}).json()["id"]
               for i in range(2)]
        plain = c.post("/v1/jobs", json=_job(GOLD + "# after the hostile ones\n")).json()["id"]
        assert c.get(f"/v1/jobs/{plain}/wait?timeout=240").json()["status"] == "done"
        for job in ids:
            out = c.get(f"/v1/jobs/{job}/wait?timeout=240").json()
            assert (out["status"], out["attempts"], out["result"]["status"]) == ("done", 1, "timeout"), out
            assert "did not finish within timeout_s (1 s)" in out["result"]["error"]
