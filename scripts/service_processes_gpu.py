"""The service's processes end with their job, on a GPU: cancel kills a running candidate (one that
spins on the host, one whose kernel spins on the device), a killed worker takes its candidates with
it, and the worker serves the next job correctly afterwards.

Standard library plus the gym (the GPU host has no web stack): drives the job store, the scheduler
and one `LocalWorker` holding the gym's `InProcessEvaluator`, as `drkernel gym serve` does.

    PYTHONPATH=src python scripts/service_processes_gpu.py --device cuda:0 --out out
    PYTHONPATH=src python scripts/service_processes_gpu.py --device cpu     # dry run (interpreter)

One PASS/FAIL line per check, a SUMMARY line, JSON in ``--out``; exit status 1 if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import tempfile
import time
from pathlib import Path

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.result import EvalResult
from drkernel.problems import builtin_solution, load_builtin
from drkernel.service.config import ServiceConfig
from drkernel.service.scheduler import Scheduler, Submission
from drkernel.service.store import JobStatus, JobStore
from drkernel.service.workers import WORKER_TAG_ENV, LocalWorker

GELU_LINE = "    y = 0.5 * x * (1.0 + _erf(x * 0.7071067811865476))"
DEVICE_SPIN = "    for _ in range(0, n * 1000000000):\n        x = x * 1.0000001 + 1e-9\n" + GELU_LINE


def _tagged() -> dict[int, str]:
    """pid -> worker tag, for every process that carries one."""
    out = {}
    needle = WORKER_TAG_ENV.encode() + b"="
    for p in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            items = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        out.update({int(p): i[len(needle):].decode() for i in items if i.startswith(needle)})
    return out


def _children_tags(pid: int) -> set[str]:
    tags = set()
    for child, tag in _tagged().items():
        try:
            if Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(pid):
                tags.add(tag)
        except OSError:
            continue
    return tags


def _ticks(tag: str) -> int:
    total = 0
    for pid, t in _tagged().items():
        if t == tag:
            try:
                f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(f[11]) + int(f[12])
            except OSError:
                continue
    return total


async def _burning(tag: str, window_s: float = 1.0) -> bool:
    before = _ticks(tag)
    await asyncio.sleep(window_s)
    return _ticks(tag) - before > 20 * window_s


async def _until(pred, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await pred():
            return True
        await asyncio.sleep(0.2)
    return False


async def _gold_ok(sched: Scheduler, problem, config: EvalConfig, seed: int) -> tuple[bool, str]:
    job = sched.submit([Submission(EvalRequest(problem, builtin_solution(problem), config.replace(seed=seed)))])[0][0]
    done = (await sched.wait([job.id], 300))[job.id]
    if done.status is not JobStatus.DONE:
        return False, f"{done.status.value}: {done.error}"
    r = EvalResult.from_json(done.result_json)
    return r.correct, r.status.value


async def _cancel_case(sched, worker, problem, config, solution: str) -> dict:
    job = sched.submit([Submission(EvalRequest(problem, solution, config.replace(timeout_s=600)))])[0][0]
    await _until(lambda: _running(sched, job.id), 120)
    (tag,) = _children_tags(worker.pid) or {""}
    spinning = await _until(lambda: _burning(tag), 120) if tag else False
    t0 = time.monotonic()
    await sched.cancel(job.id)
    quiet = await _until(lambda: _not(_burning(tag)), 60)
    return {"spinning_seen": spinning, "quiet_after_cancel": quiet, "cancel_to_quiet_s": time.monotonic() - t0,
            "worker_pid_kept": worker.pid is not None and worker.alive}


async def _running(sched, job_id) -> bool:
    return sched.store.get(job_id).status is JobStatus.RUNNING


async def _not(coro) -> bool:
    return not await coro


async def _kill_case(sched, worker, problem, config, solution: str) -> dict:
    job = sched.submit([Submission(EvalRequest(problem, solution, config.replace(timeout_s=600)))])[0][0]
    await _until(lambda: _running(sched, job.id), 120)
    (tag,) = _children_tags(worker.pid) or {""}
    await _until(lambda: _burning(tag), 120)
    pid = worker.pid
    os.kill(pid, signal.SIGKILL)

    async def gone() -> bool:
        return tag not in _tagged().values()

    orphans_gone = await _until(gone, 30)
    await sched.cancel(job.id)

    async def ready() -> bool:
        return sched.workers_view()[0]["state"] == "ready" and worker.pid != pid

    return {"orphans_gone": orphans_gone, "worker_restarted": await _until(ready, 300)}


async def main_async(args) -> dict:
    problem = next(p for p in load_builtin([1]) if p.name == "gelu")
    config = EvalConfig(device=args.device, trials=1, timing=False, profile=False, second_size=False)
    work = Path(tempfile.mkdtemp(prefix="svc-proc-"))
    cfg = ServiceConfig(db_path=str(work / "jobs.sqlite"), cache=False, slots_per_worker=2,
                        evaluator_kwargs={"concurrency": 2, "pool_size": 2}, job_timeout_grace_s=120.0)
    store = JobStore(cfg.db_path)
    worker = LocalWorker("w0", args.device, cfg.evaluator, cfg.evaluator_kwargs, 2)
    sched = Scheduler(store, [worker], cfg)
    await sched.start()
    gold = builtin_solution(problem)
    host_spin = gold.replace("        y = torch.empty_like(x)", "        while True:\n            pass")
    device_spin = gold.replace(GELU_LINE, DEVICE_SPIN)
    out: dict = {"device": args.device}
    try:
        out["gold_before"] = await _gold_ok(sched, problem, config, 1)
        out["cancel_host_spin"] = await _cancel_case(sched, worker, problem, config, host_spin)
        out["cancel_device_spin"] = await _cancel_case(sched, worker, problem, config, device_spin)
        out["gold_after_cancel"] = await _gold_ok(sched, problem, config, 2)
        out["kill_worker"] = await _kill_case(sched, worker, problem, config, device_spin)
        out["gold_after_kill"] = await _gold_ok(sched, problem, config, 3)
    finally:
        await sched.stop()
        store.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = ap.parse_args()
    out = asyncio.run(main_async(args))
    checks = {
        "gold_before": out["gold_before"][0],
        "cancel_host_spin": out["cancel_host_spin"]["spinning_seen"] and out["cancel_host_spin"]["quiet_after_cancel"],
        "cancel_device_spin": out["cancel_device_spin"]["quiet_after_cancel"],
        "gold_after_cancel": out["gold_after_cancel"][0],
        "kill_worker_orphans": out["kill_worker"]["orphans_gone"] and out["kill_worker"]["worker_restarted"],
        "gold_after_kill": out["gold_after_kill"][0],
    }
    for name, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'} {name}: {json.dumps(out.get(name, out.get('kill_worker')))}")
    failed = [n for n, ok in checks.items() if not ok]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service_processes_gpu.json").write_text(json.dumps({**out, "checks": checks}, indent=2))
    print(f"SUMMARY service processes on {args.device}: {len(checks) - len(failed)}/{len(checks)} passed"
          + (f" (failed: {failed})" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
