"""Fault drill for the KernelGym service with real gym interpreter workers: kill -9 a worker in the
middle of a job, then kill -9 the server in the middle of a batch and restart it on the same store.
Every job must still complete with a result, identical to a direct evaluation of its solution.

    PYTHONPATH=src python benchmarks/service_faults.py --jobs 120 --distinct 24
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests" / "service"))

from service_load import comparable, direct_evaluations, workload  # noqa: E402

from drkernel.service.client import ServiceClient  # noqa: E402


def _until(pred, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=120)
    ap.add_argument("--distinct", type=int, default=24)
    ap.add_argument("--devices", default="cpu:2")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "service_faults.json")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/kernelgym_faults"))
    args = ap.parse_args()

    from service_server import ServerProcess

    pool = workload(args.distinct, seed=7)
    requests = [pool[i % len(pool)] for i in range(args.jobs)]
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = args.workdir / f"faults-{int(time.time())}.sqlite"
    server_args = ("--devices", args.devices, "--lease-s", "10")
    events = []
    srv = ServerProcess(db, *server_args).start(timeout_s=300)
    t0 = time.perf_counter()
    with ServiceClient(srv.url, retries=12, backoff_s=0.5) as c:
        ids = c.submit_batch(requests)
        print(f"submitted {len(ids)} jobs ({len(pool)} distinct solutions)")

        # 1. kill -9 a worker while it holds a job
        busy = _until(
            lambda: next((w for w in c.workers() if w["in_flight"] > 0), None), 300, "a busy worker"
        )
        os.kill(busy["pid"], signal.SIGKILL)
        events.append(
            {
                "t": round(time.perf_counter() - t0, 2),
                "event": "kill -9 worker",
                "worker": busy["name"],
                "pid": busy["pid"],
                "in_flight": busy["in_flight"],
            }
        )
        print(events[-1])

        # 2. kill -9 the server mid-batch, restart it on the same store and port
        _until(lambda: c.queue()["counts"]["done"] >= len(ids) // 3, 1800, "a third of the jobs")
        counts = c.queue()["counts"]
        srv.kill9()
        events.append(
            {"t": round(time.perf_counter() - t0, 2), "event": "kill -9 server", "counts_before": counts}
        )
        print(events[-1])
        srv2 = ServerProcess(db, *server_args, port=srv.port).start(timeout_s=300)
        events.append({"t": round(time.perf_counter() - t0, 2), "event": "server restarted"})
        print(events[-1])
        try:
            infos = c.collect(ids, timeout_s=3600, progress=True)
            final = c.queue()["counts"]
            metrics = [line for line in _metrics(srv2.url) if line.startswith("kernelgym_errors_total")]
        finally:
            srv2.stop()
            srv.stop()
    wall = time.perf_counter() - t0

    direct = direct_evaluations(pool)
    not_done = [i for i in ids if infos[i].status != "done" or infos[i].result is None]
    mismatches = [
        i
        for i, r in zip(ids, requests)
        if i not in not_done and comparable(infos[i].result) != direct[infos[i].result.solution_hash]
    ]
    retried = sum(infos[i].attempts > 1 for i in ids)
    report = {
        "date": date.today().isoformat(),
        "machine": f"CPU, {os.cpu_count()} cores",
        "jobs": len(ids),
        "distinct_solutions": len(pool),
        "devices": args.devices,
        "wall_s": round(wall, 1),
        "events": events,
        "final_counts": final,
        "not_done": len(not_done),
        "mismatches": len(mismatches),
        "jobs_retried": retried,
        "error_metrics_after_restart": metrics,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    ok = not not_done and not mismatches and final["done"] == len(ids)
    print("PASS: every job completed with a result identical to direct evaluation" if ok else "FAIL")
    sys.exit(0 if ok else 1)


def _metrics(url: str) -> list[str]:
    import httpx

    return httpx.get(f"{url}/metrics", timeout=10).text.splitlines()


if __name__ == "__main__":
    main()
