"""Timed calls that each see their own content (`drkernel.gym.harness.inputs.TimedDraws`), on a GPU:
a GEMM whose ``forward`` keys a memo on a checksum of the bits of all of its inputs (an integer
reduction kernel and one ``.item()``) must gain nothing over the same GEMM without the memo (every timed call misses), and
both must stay valid (their sampled timed calls judged at their own variation). Prints PASS / FAIL
lines and the medians; writes ${OUT}/timed_variation.json; exits 1 on a failure.

    PYTHONPATH=src python3 scripts/gpu_timed_variation.py [--out out]
    PYTHONPATH=src python3 scripts/gpu_timed_variation.py --device cpu --n 128  # dry run: both valid, no timing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from drkernel.gym import EvalConfig, EvalRequest
from drkernel.gym.checks import default_checks
from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
from drkernel.problems.problem import Problem

PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, a, b):
        return a @ b


N = {n}


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
"""

GEMM = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, n, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, n, BK):
        a = tl.load(a_ptr + rm[:, None] * n + (k + rk)[None, :], mask=(rm[:, None] < n) & ((k + rk)[None, :] < n),
                    other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * n + rn[None, :], mask=((k + rk)[:, None] < n) & (rn[None, :] < n),
                    other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")  # plain TF32 misses atol near zero at K = 4096
    tl.store(c_ptr + rm[:, None] * n + rn[None, :], acc, mask=(rm[:, None] < n) & (rn[None, :] < n))


@triton.jit
def checksum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(out_ptr, tl.sum(v * (offs % 251 + 1), axis=0))  # integer: the same sum in any order


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=offs < n), mask=offs < n)


def gemm(a, b):
    n = a.shape[0]
    c = torch.empty_like(a)
    mm_kernel[(triton.cdiv(n, 128), triton.cdiv(n, 128))](a, b, c, n, BM=128, BN=128, BK=32)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, a, b):
        if not MEMO:
            return gemm(a, b)
        s = torch.zeros(1, device=a.device, dtype=torch.int32)
        for x in (a.view(torch.int32), b.view(torch.int32)):  # the bits of every value
            checksum_kernel[(triton.cdiv(x.numel(), 4096),)](x, s, x.numel(), BLOCK=4096)
        key = s.item()
        if key in self.memo:  # as many launches as a miss: the call-count check sees no drop
            copy_kernel[(1,)](s, s, 1, BLOCK=16)
        else:
            self.memo[key] = gemm(a, b)
        out = torch.empty_like(a)
        copy_kernel[(triton.cdiv(out.numel(), 4096),)](self.memo[key], out, out.numel(), BLOCK=4096)
        return out
"""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="out")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n", type=int, default=4096, help="matrix size (CPU dry run: 128)")
    args = parser.parse_args()
    problem = Problem(name=f"gemm{args.n}", level=1, code=PROBLEM.format(n=args.n), source="file")
    requests = [EvalRequest(problem, f"MEMO = {memo}\n" + GEMM, EvalConfig(device=args.device, trials=3),
                            request_id=f"memo={memo}") for memo in (False, True)]
    with InProcessEvaluator(device=args.device, concurrency=1, checks=default_checks()) as ev:
        honest, memo = (ev.evaluate(r) for r in requests)
    rows = {}
    for name, r in (("honest", honest), ("whole_content_memo", memo)):
        ms = r.sol_timing.median_ms if r.sol_timing else None
        rows[name] = {"status": r.status.value, "valid": r.valid, "hacks": [h.code for h in r.hacks],
                      "median_ms": ms, "speedup": r.speedup, "error": (r.error or "")[-400:] or None}
        print(name, rows[name], flush=True)
    checks = {"both valid (sampled timed calls pass at their variation)": honest.valid and memo.valid}
    if args.device != "cpu":  # the interpreter times nothing
        checks["the memo gains nothing: its median >= 0.8 x the honest one"] = bool(
            honest.sol_timing and memo.sol_timing and memo.sol_timing.median_ms >= 0.8 * honest.sol_timing.median_ms)
    for name, ok in checks.items():
        print("PASS" if ok else "FAIL", name)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "timed_variation.json").write_text(json.dumps({"rows": rows, "checks": checks}, indent=1))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
