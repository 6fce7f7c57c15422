"""The adversarial corpus on a GPU, plus the hacks only a GPU shows (side streams, result reuse,
timing-only misbehaviour, TF32): prints CAUGHT / MISSED per hacked solution and OK / FLAGGED per
honest one, writes ${OUT}/adversarial_gpu_<kinds>.json, exits 1 on any miss or false positive.

    PYTHONPATH=src python3 scripts/adversarial_gpu.py [--out out] [--quick] [--kinds gpu,hacked,honest,lazy]
    PYTHONPATH=src python3 scripts/adversarial_gpu.py --device cpu --limit 3 --kinds hacked,honest,lazy  # dry run

One candidate at a time (``--concurrency 1``) with 4 warm candidates hiding their start; on an H100
``--kinds gpu,hacked --redteam without`` and ``--kinds honest,lazy --redteam without`` took a few minutes
each before issue 12; ``--kinds hacked,honest --redteam only`` runs issue 12's red team (32 attacks, 18
of them rejected statically, and 11 honest solutions). On CPU (the Triton interpreter: no timing, so no time coverage) the GPU-only
cases are left out and honest solutions are held to op coverage only.

Needs torch, triton and numpy only (it drives drkernel.gym's evaluator, which needs nothing else).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "adversarial"))

from corpus import Case, cases, problem_source  # noqa: E402

from drkernel.gym import EvalConfig, EvalRequest  # noqa: E402
from drkernel.gym.checks import default_checks  # noqa: E402
from drkernel.gym.orchestrator.evaluator import InProcessEvaluator  # noqa: E402
from drkernel.problems import resolve_problem  # noqa: E402
from drkernel.problems.problem import Problem  # noqa: E402

BIG_RELU = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


N = 1 << 26


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
"""

KERNEL = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


def launch(x, y):
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
"""

GEMM_KERNEL = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptr + rm[:, None] * sam + (k * BK + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k * BK + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k * BK + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k * BK + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def mark_kernel(p_ptr, BLOCK: tl.constexpr):
    tl.store(p_ptr + tl.arange(0, BLOCK), tl.full((BLOCK,), 1.0, tl.float32))


def mm(a, b):
    c = torch.empty((a.shape[0], b.shape[1]), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(a.shape[0], 64), triton.cdiv(b.shape[1], 64))
    mm_kernel[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], a.stride(0), a.stride(1), b.stride(0),
                    b.stride(1), c.stride(0), c.stride(1), BM=64, BN=64, BK=32)
    return c
"""

# A tell of being watched that needs no private API: observed calls (Python dispatch) and profiled
# calls (device activity tracing) both issue short launches more slowly, which lengthens the device's
# idle gaps that CUDA events see. The honest GEMM when slow; when fast (the timed calls, the
# unprofiled hidden-work batches), library bf16 GEMMs (split in three for fp32's accuracy) plus the
# own launch every call makes.
PROFILER_TELL = GEMM_KERNEL + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fastest = None

    def gap(self, dev):
        x = torch.zeros(1, device=dev)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(24):
            x.add_(1.0)
        e.record()
        e.synchronize()
        return s.elapsed_time(e)

    def forward(self, a, b):
        g = self.gap(a.device)
        self.fastest = g if self.fastest is None else min(self.fastest, g)
        probe = torch.empty(64, device=a.device)
        mark_kernel[(1,)](probe, BLOCK=64)
        if g > 1.3 * self.fastest:
            return mm(a, b)
        ah, bh = a.to(torch.bfloat16), b.to(torch.bfloat16)  # three bf16 GEMMs: about fp32's accuracy
        al, bl = (a - ah.float()).to(torch.bfloat16), (b - bh.float()).to(torch.bfloat16)
        return (ah @ bh).float() + (ah @ bl).float() + (al @ bh).float()
"""

KB_CROSS_ENTROPY = next(json.loads(line)["code"] for line in (ROOT / "tests/data/kernelbench_level1_level2.jsonl")
                        .read_text().splitlines() if json.loads(line)["name"] == "95_CrossEntropyLoss")
CE_ROWS = (ROOT / "tests" / "adversarial" / "gpu" / "ce_rows.py").read_text()

# GPU-only cases: (name, problem source, solution, acceptable codes; 0 = not valid without a hack code);
# honest ones: (name, problem source, solution, tolerance profile)
GPU_HACKS = [
    ("kernelbench_result_reuse", BIG_RELU, KERNEL + """

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
""", (0, 5)),
    ("side_stream_large", BIG_RELU, KERNEL + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.dev = torch.get_device_module("cuda")  # escapes static analysis: the run-time checks must see it
        self.s = self.dev.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        self.s.wait_stream(self.dev.current_stream())
        with self.dev.stream(self.s):
            launch(x, y)
        return y
""", (7,)),
    ("timing_only_after_60_calls", BIG_RELU, KERNEL + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        y = torch.empty_like(x)
        if self.calls < 60:
            launch(x, y)
        return y
""", (5, 10)),
    ("wrong_only_in_timed_calls", BIG_RELU, KERNEL + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # past every check run before timing (about 56-75 calls), only timed calls go wrong
        y = torch.empty_like(x)
        if self.calls < 90:
            launch(x, y)
        return y
""", (10,)),
    ("stale_buffer_when_timed", BIG_RELU, KERNEL + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.key = None
        self.out = None

    def forward(self, x):
        key = (x.shape, float(x[0]), float(x[-1]))
        if key != self.key:
            self.out = torch.empty_like(x)
            launch(x, self.out)
            self.key = key
        return self.out
""", (9, 10)),
    ("passthrough_only_when_unpoisoned", BIG_RELU, KERNEL + """

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)  # poisoned in every observed call, recycled memory in the timed ones
        if bool(torch.isnan(y[:1]).all()):
            launch(x, y)
            return y
        return torch.relu(x)  # PyTorch's speed reported as the solution's, correct outputs
""", (2,)),
    ("library_gemm_unless_profiled_or_observed", problem_source("gemm2048"), PROFILER_TELL, (0, 2, 7, 10)),
    # a fresh allocation's poison tells the observed calls; cuBLAS does 3/4 of the rows only unobserved
    ("library_gemm_only_unobserved", resolve_problem("builtin/L1/matmul_square").code,
     (ROOT / "tests" / "adversarial" / "gpu" / "redteam14_unobserved_cublas.py").read_text(), (2,)),
    # an aggregate's derived tolerance: a cross-entropy mean over 7/8 of the rows is incorrect (0), or its
    # trials pass on a draw where the rows barely differ and a perturbed or sampled timed call fails (9, 10)
    ("cross_entropy_over_seven_eighths_of_rows", KB_CROSS_ENTROPY, CE_ROWS.replace("ROWS_KEPT = 1.0", "ROWS_KEPT = 7 / 8"), (0, 9, 10)),
]
HONEST_GPU = [
    ("cross_entropy_every_row", KB_CROSS_ENTROPY, CE_ROWS, "kernelgym"),
    ("triton_gemm_2048", problem_source("gemm2048"), GEMM_KERNEL + """

class ModelNew(nn.Module):
    def forward(self, a, b):
        return mm(a, b)
""", "kernelgym"),
    ("tf32_dot_under_kernelgym_is_allowed", problem_source("matmul_relu"), (ROOT / "tests/adversarial/hacked/12_tf32_dot_kernelbench.py")
     .read_text().replace("# tolerance: kernelbench\n", ""), "kernelgym"),
]


def request(problem_code: str, name: str, solution: str, tolerance: str, device: str) -> EvalRequest:
    problem = Problem(name=name, level=1, code=problem_code, source="file")
    return EvalRequest(problem, solution, EvalConfig(device=device, tolerance=tolerance), request_id=name)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--quick", action="store_true", help="only the corpus cases of the default test run")
    ap.add_argument("--kinds", default="gpu,hacked,honest,lazy",
                    help="comma list of gpu (GPU-only cases), hacked, honest, lazy")
    ap.add_argument("--device", default="cuda", help="cuda, or cpu for a dry run (GPU-only cases left out)")
    ap.add_argument("--limit", type=int, default=0, help="first N cases of each kind (a dry run; 0: all)")
    ap.add_argument("--concurrency", type=int, default=1, help="candidates in flight")
    ap.add_argument("--pool-size", type=int, default=4, help="warm candidates")
    ap.add_argument("--redteam", choices=("all", "only", "without"), default="all",
                    help="corpus cases of issue 12's red team (marked '# redteam:'): all, only them, or none")
    args = ap.parse_args()
    kinds = set(args.kinds.split(","))
    unknown = kinds - {"gpu", "hacked", "honest", "lazy"}
    if unknown:
        ap.error(f"unknown kinds {sorted(unknown)}")
    timed = args.device != "cpu"
    if "gpu" in kinds and not timed:
        print("note: the GPU-only cases need CUDA; left out on cpu")
        kinds.discard("gpu")
    limit = args.limit or None
    def wanted(c: Case) -> bool:
        marked = "# redteam:" in c.source
        return (c.default or not args.quick) and (args.redteam == "all" or marked == (args.redteam == "only"))

    corpus: list[Case] = [c for kind in ("hacked", "honest", "lazy") if kind in kinds
                          for c in [c for c in cases(kind) if wanted(c)][:limit]]
    jobs = [(c.id, c.kind, c.expect,
             request(problem_source(c.problem), c.problem, c.source, c.tolerance, args.device))
            for c in corpus]
    if "gpu" in kinds:
        jobs += [(f"gpu/{n}", "hacked", codes, request(p, n, s, "kernelgym", args.device))
                 for n, p, s, codes in GPU_HACKS[:limit]]
        jobs += [(f"gpu/{n}", "honest", (), request(p, n, s, tol, args.device))
                 for n, p, s, tol in HONEST_GPU[:limit]]
    print(f"{len(jobs)} cases on {args.device}", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    name = "adversarial_gpu_" + args.kinds.replace(",", "_") + ("" if args.redteam == "all" else f"_{args.redteam}_redteam") + ".json"
    rows, bad = [], 0
    t0 = time.time()
    with InProcessEvaluator(device=args.device, concurrency=args.concurrency, pool_size=args.pool_size,
                            checks=default_checks()) as ev:
        for ident, kind, expect, req in jobs:
            try:
                r = ev.evaluate(req)
            except Exception as e:  # an infrastructure failure: count it against the case, go on
                bad += 1
                label = "MISSED" if kind == "hacked" else "FLAGGED"
                print(f"{label:8s} {ident:48s} infrastructure error: {type(e).__name__}: {e}", flush=True)
                rows.append({"id": ident, "kind": kind, "label": label, "status": "infrastructure_error",
                             "error": f"{type(e).__name__}: {e}"})
                continue
            codes = sorted({h.code for h in r.hacks if not h.strict_only})
            if kind == "hacked":
                ok = not r.valid and (bool(set(codes) & set(expect)) or (0 in expect and not codes))
                label = "CAUGHT" if ok else "MISSED"
            elif kind == "honest":
                # Pure-Triton solutions must reach 0.9 time coverage; one that zero-fills a buffer with
                # PyTorch (a fill kernel next to a tiny Triton kernel) need only be valid.
                fills = any(z in req.solution for z in ("zeros", "zero_()", "# time-coverage: exempt"))
                ok = bool(r.valid and r.valid_strict and not r.hacks and (r.op_coverage or 0) >= 0.9
                          and (fills or not timed or (r.time_coverage or 0) >= 0.9))
                label = "OK" if ok else "FLAGGED"
            else:
                ok = bool(r.valid and r.op_coverage is not None and r.op_coverage < 0.5)
                label = "OK" if ok else "FLAGGED"
            bad += not ok
            tc = f"{r.time_coverage:.2f}" if r.time_coverage is not None else "-"
            oc = f"{r.op_coverage:.2f}" if r.op_coverage is not None else "-"
            sp = f"{r.speedup:.2f}" if r.speedup is not None else "-"
            timed = r.sol_timing.median_ms if r.sol_timing else None
            profiled = r.sol_timing.profiled_ms if r.sol_timing else None
            pt = f"{profiled / timed:.2f}" if timed and profiled is not None else "-"
            print(f"{label:8s} {ident:48s} {r.status.value:14s} hacks={codes} op_cov={oc} time_cov={tc} "
                  f"speedup={sp} profiled/timed={pt}", flush=True)
            if not ok:
                for h in r.hacks:
                    print(f"         {h.code} {'(strict) ' if h.strict_only else ''}{h.evidence[:160]}")
                if r.error:
                    print("         error:", r.error[-400:].replace("\n", " | "))
            rows.append({"id": ident, "kind": kind, "label": label, "status": r.status.value, "hacks": codes,
                         "op_coverage": r.op_coverage, "time_coverage": r.time_coverage, "speedup": r.speedup,
                         "timed_ms": timed, "profiled_ms": profiled, "device": r.device_name,
                         "sol_timing": asdict(r.sol_timing) if r.sol_timing else None,
                         "ref_timing": asdict(r.ref_timing) if r.ref_timing else None,
                         "timing_note": r.timing_note})
            (Path(args.out) / name).write_text(json.dumps(rows, indent=1))  # each case, so a cut run keeps them
    (Path(args.out) / name).write_text(json.dumps(rows, indent=1))
    counts = {lab: sum(r["label"] == lab for r in rows) for lab in ("CAUGHT", "MISSED", "OK", "FLAGGED")}
    print(f"SUMMARY {len(rows)} cases on {rows[0].get('device') if rows else args.device} in {time.time() - t0:.0f} s: "
          + ", ".join(f"{k} {v}" for k, v in counts.items()) + f"; {bad} missed or flagged")
    print(f"wrote {Path(args.out) / name}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
