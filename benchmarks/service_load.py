"""CPU load test of the KernelGym service: N concurrent clients submit M jobs in total, drawn from a
few hundred distinct Triton solutions to small problems, against a real server with interpreter
workers (the real gym). Checks: no job lost or duplicated, every job's result identical to a direct
evaluation of its solution. Reports p50/p99 API latency and jobs per second; writes JSON.

    PYTHONPATH=src python benchmarks/service_load.py --jobs 10000 --clients 20 --distinct 200
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import statistics
import sys
import threading
import time
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any, Sequence

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "service"))

from drkernel.gym.config import EvalConfig, EvalRequest  # noqa: E402
from drkernel.gym.result import EvalResult  # noqa: E402
from drkernel.problems.problem import Problem  # noqa: E402

_REF = """
import torch
import torch.nn as nn

N = {n}

class Model(nn.Module):
    def forward(self, x, y):
        return {expr}

def get_inputs():
    return [torch.randn(N), torch.randn(N)]

def get_init_inputs():
    return []
"""

# name -> (torch expression of the reference, Triton expression of a correct kernel, a wrong one)
OPS = {
    "add": ("x + y", "a + b", "a - b"),
    "mul": ("x * y", "a * b", "a * b + 1.0"),
    "add_relu": ("torch.relu(x + y)", "tl.maximum(a + b, 0.0)", "tl.maximum(a - b, 0.0)"),
    "scaled_sub": ("(x - y) * 0.5", "(a - b) * 0.5", "(a - b) * 0.25"),
}

_SOL = """
import torch
import torch.nn as nn
import triton
import triton.language as tl

# variant {tag}


@triton.jit
def op_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x_ptr + offs, mask=mask)
    b = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, {expr}, mask=mask)


class {cls}(nn.Module):
    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        op_kernel[(triton.cdiv(n, {block}),)](x, y, out, n, BLOCK={block})
        return out
"""

KINDS = ("correct", "wrong", "no_modelnew", "syntax_error")
GYM = "drkernel.gym:InProcessEvaluator"
BLOCKS = (64, 128, 256, 512, 1024)


def problems() -> dict[str, Problem]:
    return {
        name: Problem(name=name, level=1, code=_REF.format(n=4096, expr=ref), problem_id=name, source="load")
        for name, (ref, _, _) in OPS.items()
    }


def solution(op: str, kind: str, block: int, tag: int) -> str:
    _, good, bad = OPS[op]
    src = _SOL.format(
        tag=tag,
        expr=bad if kind == "wrong" else good,
        block=block,
        cls="ModelOld" if kind == "no_modelnew" else "ModelNew",
    )
    return (
        src.replace("def forward(self, x, y):", "def forward(self, x, y)") if kind == "syntax_error" else src
    )


def workload(distinct: int, seed: int = 0) -> list[EvalRequest]:
    """``distinct`` different requests over the small problems, most of them correct."""
    probs = problems()
    rng = random.Random(seed)
    kinds = rng.choices(KINDS, weights=(6, 2, 1, 1), k=distinct)
    config = EvalConfig(device="cpu", trials=2, second_size=False)
    return [
        EvalRequest(problem=probs[op], solution=solution(op, kind, BLOCKS[i % len(BLOCKS)], i), config=config)
        for i, (op, kind) in enumerate(zip(rng.choices(sorted(OPS), k=distinct), kinds))
    ]


def comparable(r: EvalResult) -> dict[str, Any]:
    """What must be identical between a service result and a direct evaluation (run-to-run noise
    such as stage times, the request id, and the trial seeds, which the gym draws secretly for every
    evaluation, left out)."""
    return {
        "status": r.status.value,
        "compiled": r.compiled,
        "correct": r.correct,
        "valid": r.valid,
        "valid_strict": r.valid_strict,
        "hacks": sorted(h.code for h in r.hacks),
        "problem_key": r.problem_key,
        "trials": [(t.trial, t.passed) for t in r.trials],
        "solution_hash": r.solution_hash,
        "device_name": r.device_name,
        "op_coverage": r.op_coverage,
    }


def direct_evaluations(requests: Sequence[EvalRequest], evaluator: str = GYM) -> dict[str, dict[str, Any]]:
    """Each distinct request evaluated directly, in this process, by the evaluator the workers run
    (the gym by default): solution hash -> comparable."""
    import asyncio

    from drkernel.service.workers import load_factory

    ev = load_factory(evaluator)(device="cpu")
    try:
        results = asyncio.run(ev.evaluate_batch(list(requests)))
    finally:
        ev.close()
    return {r.solution_hash: comparable(r) for r in results}


def percentile(xs: Sequence[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def run_clients(
    url: str,
    token: str | Sequence[str] | None,
    pool: Sequence[EvalRequest],
    jobs: int,
    clients: int,
    seed: int = 0,
    max_batch: int = 50,
) -> dict[str, Any]:
    """``clients`` threads, each with its own `ServiceClient`, submit their share of ``jobs``
    (random batches of 1..max_batch drawn from ``pool``), then collect every result. ``token``: one
    for all, or several (tenants): thread k uses ``token[k % len(token)]``."""
    from drkernel.service.client import ServiceClient

    latencies: list[float] = []
    lock = threading.Lock()
    per_client: list[dict[str, Any]] = [{} for _ in range(clients)]

    def client_main(k: int) -> None:
        rng = random.Random(seed * 1000 + k)
        share = jobs // clients + (1 if k < jobs % clients else 0)
        ids, picks = [], []
        mine = token if token is None or isinstance(token, str) else token[k % len(token)]
        with ServiceClient(url, mine, poll_s=2.0) as c:
            c._chunk(1)  # learn the server's batch limit before timing anything
            while len(ids) < share:
                n = min(share - len(ids), rng.randint(1, max_batch))
                batch = [rng.randrange(len(pool)) for _ in range(n)]
                t0 = time.perf_counter()
                ids += c.submit_batch([pool[i] for i in batch])
                with lock:
                    latencies.append(time.perf_counter() - t0)
                picks += batch
            infos = c.collect(ids)
        per_client[k] = {"ids": ids, "picks": picks, "infos": infos}

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client_main, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "latencies": latencies, "per_client": per_client}


def verify(
    run: dict[str, Any], pool: Sequence[EvalRequest], direct: dict[str, dict[str, Any]], jobs: int
) -> dict[str, Any]:
    """Lost, duplicated and mismatching jobs (all must be zero)."""
    all_ids = [i for c in run["per_client"] for i in c["ids"]]
    mismatches, not_done, statuses = 0, 0, Counter()
    for c in run["per_client"]:
        for job_id, pick in zip(c["ids"], c["picks"]):
            info = c["infos"].get(job_id)
            if info is None or info.status != "done":
                not_done += 1
                continue
            statuses[info.result.status.value] += 1
            digest = hashlib.sha256(pool[pick].solution.encode()).hexdigest()
            mismatches += comparable(info.result) != direct[digest]
    return {
        "submitted": len(all_ids),
        "expected": jobs,
        "duplicated_ids": len(all_ids) - len(set(all_ids)),
        "lost": jobs - len(set(all_ids)) + not_done,
        "mismatches": mismatches,
        "statuses": dict(statuses),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--distinct", type=int, default=200)
    ap.add_argument("--devices", default="cpu:2")
    ap.add_argument("--evaluator", default=GYM, help="worker evaluator; another one measures the API alone")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "service_load.json")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/kernelgym_load"))
    args = ap.parse_args()

    import httpx
    from service_server import ServerProcess

    pool = workload(args.distinct)
    t = time.perf_counter()
    direct = direct_evaluations(pool, args.evaluator)
    direct_s = time.perf_counter() - t
    print(f"direct evaluation of {len(pool)} distinct solutions: {direct_s:.1f} s")
    args.workdir.mkdir(parents=True, exist_ok=True)
    db = args.workdir / f"load-{int(time.time())}.sqlite"
    srv = ServerProcess(
        db, "--devices", args.devices, "--evaluator", args.evaluator, "--max-batch", "1000"
    ).start(timeout_s=600)
    try:
        from drkernel.service.store import JobStore

        store = JobStore(db)
        tenants = [srv.token, store.add_client("tenant-b")]  # two tenants share the service
        store.close()
        run = run_clients(srv.url, tenants, pool, args.jobs, args.clients)
        check = verify(run, pool, direct, args.jobs)
        queue = httpx.get(f"{srv.url}/v1/queue", headers={"Authorization": f"Bearer {srv.token}"}).json()["counts"]
        metrics = httpx.get(f"{srv.url}/metrics").text
    finally:
        srv.stop()
    lat = run["latencies"]
    evaluations = sum(
        float(line.split()[-1])
        for line in metrics.splitlines()
        if line.startswith("kernelgym_eval_results_total{")
    )
    report = {
        "date": date.today().isoformat(),
        "machine": f"CPU, {__import__('os').cpu_count()} cores",
        "python": platform.python_version(),
        "jobs": args.jobs,
        "clients": args.clients,
        "distinct_solutions": len(pool),
        "devices": args.devices,
        "evaluator": args.evaluator,
        "wall_s": round(run["wall_s"], 2),
        "jobs_per_s": round(args.jobs / run["wall_s"], 1),
        "submit_calls": len(lat),
        "submit_latency_p50_ms": round(1000 * percentile(lat, 50), 1),
        "submit_latency_p99_ms": round(1000 * percentile(lat, 99), 1),
        "submit_latency_mean_ms": round(1000 * statistics.mean(lat), 1),
        "evaluations_run": evaluations,
        "direct_evaluation_s": round(direct_s, 1),
        "store_counts": queue,
        **check,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    for k, v in report.items():
        print(f"{k:>26}: {v}")
    ok = check["lost"] == check["duplicated_ids"] == check["mismatches"] == 0 and queue["done"] == args.jobs
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
