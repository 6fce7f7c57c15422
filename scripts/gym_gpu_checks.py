"""GPU checks of the gym (run by scripts/gpu_check.sh; torch, triton and numpy only).

Exercises the code paths the CPU tests cannot: outputs and post-run inputs in the candidate's
staging buffer (a VMM allocation whose descriptor crosses the sandboxes),
CUDA-event timing with L2 flushes, the exclusive timing region under concurrency, the memory
fraction, device faults. Evaluates every gold solution of the built-in suite. Prints one
PASS/FAIL line per check and writes ``$OUT/gym_gpu_checks.json``; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator, Status
from drkernel.problems import Problem, builtin_solution, load_builtin

REFERENCE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 4096
dim = 8192

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''

SOLUTION = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 4096),)](x, y, n, BLOCK=4096, num_warps=8)
        return y
'''

TUPLE_REFERENCE = REFERENCE.replace("return torch.relu(x)", "return torch.relu(x).t(), (x.sum(), 3)")
TUPLE_SOLUTION = SOLUTION.replace("        return y\n", "        return y.t(), (x.sum(), 3)\n")

RELU = Problem(name="relu_gpu", level=1, code=REFERENCE, problem_id="relu_gpu", source="check")
TUPLE = Problem(name="tuple_gpu", level=1, code=TUPLE_REFERENCE, problem_id="tuple_gpu", source="check")
CFG = EvalConfig(second_size=False)


def variant(old: str, new: str) -> str:
    assert old in SOLUTION, old
    return SOLUTION.replace(old, new)


def on_device(r) -> bool:
    """The outputs crossed from the candidate's sandbox to the judge's in device memory (the staging
    buffer's descriptor), not through host copies."""
    return not any("through the host" in w for w in r.warnings)


CASES = [
    # (name, problem, solution, config changes, expected status, extra check)
    ("correct_and_timed", RELU, SOLUTION, {}, Status.CORRECT,
     lambda r: r.speedup is not None and 10 <= r.ref_timing.n <= 100 and 10 <= r.sol_timing.n <= 100  # adaptive stop
     and [k.name for k in r.kernels if k.own] == ["relu_kernel"] and on_device(r)),
    ("tuple_and_strided_outputs_via_staging", TUPLE, TUPLE_SOLUTION, {}, Status.CORRECT, on_device),
    ("incorrect", RELU, variant("tl.maximum(x, 0.0)", "x"), {}, Status.INCORRECT, lambda r: r.speedup is None),
    ("input_mutation_hack_6", RELU, variant("        return y\n", "        x.zero_()\n        return y\n"), {},
     Status.CORRECT, lambda r: [h.code for h in r.hacks] == [6] and r.valid is False),
    ("illegal_address_crashes", RELU, variant("tl.store(y_ptr + offs,", "tl.store(y_ptr + offs + (1 << 40),"), {},
     Status.CRASHED, lambda r: True),
    ("device_oom", RELU, variant("y = torch.empty_like(x)", "y = torch.empty(1 << 42, device=x.device)"), {},
     Status.OUT_OF_MEMORY, lambda r: True),
    ("timeout", RELU, variant("y = torch.empty_like(x)", "while True:\n            pass"), {"timeout_s": 8.0},
     Status.TIMEOUT, lambda r: r.elapsed_s < 60),
    ("compile_error", RELU, variant("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK - 1)"), {}, Status.COMPILE_ERROR,
     lambda r: "power of 2" in (r.error or "")),
    ("compile_reference", RELU, SOLUTION, {"reference": "compile"}, Status.CORRECT, lambda r: r.speedup is not None),
]


def run_cases(ev: InProcessEvaluator, report: dict) -> int:
    failed = 0
    for name, problem, source, changes, expect, extra in CASES:
        t = time.monotonic()
        try:
            r = ev.evaluate(EvalRequest(problem=problem, solution=source, config=CFG.replace(**changes)))
        except Exception as e:  # an infrastructure failure is a failed check, not the end of the run
            failed += 1
            report["cases"][name] = {"ok": False, "exception": f"{type(e).__name__}: {e}"}
            print(f"FAIL {name}: raised {type(e).__name__}: {str(e)[-1500:]}")
            continue
        ok = r.status is expect and bool(extra(r))
        failed += not ok
        report["cases"][name] = {"ok": ok, "status": r.status.value, "expected": expect.value,
                                 "seconds": time.monotonic() - t, "speedup": r.speedup, "error": r.error,
                                 "stages": r.stage_seconds, "hacks": [h.name for h in r.hacks]}
        speed = f"speedup {r.speedup:.3f}" if r.speedup else ""
        print(f"{'PASS' if ok else 'FAIL'} {name}: {r.status.value} (expected {expect.value}) "
              f"{time.monotonic() - t:.2f}s {speed}")
        if not ok and r.error:
            print("    " + r.error.replace("\n", "\n    ")[-1500:])
    return failed


def run_vmm(report: dict) -> int:
    """The staging buffer's driver calls (`drkernel.gym.harness.vmm`): a mapping through the exported
    descriptor sees the bytes; a size larger than the allocation, or a descriptor that is not an
    allocation, is refused (the judge then asks for host bytes)."""
    import torch

    from drkernel.gym.harness import vmm

    dev = torch.device("cuda:0")
    x = vmm.Exported(3 << 20, dev)
    x.tensor.copy_(torch.arange(x.nbytes, device=dev, dtype=torch.int64).to(torch.uint8))
    with vmm.imported(x.fd, x.nbytes, dev) as t:
        same = bool(torch.equal(t, x.tensor))
    refused = []
    r, w = os.pipe()
    for fd, size in ((x.fd, 2 * x.nbytes), (x.fd, x.nbytes + 1), (r, x.nbytes)):
        try:
            with vmm.imported(fd, size, dev):
                refused.append(False)
        except vmm.VmmError:
            refused.append(True)
    os.close(r)
    os.close(w)
    x.close()
    ok = same and all(refused)
    report["vmm"] = {"ok": ok, "same": same, "refused": refused, "nbytes": x.nbytes}
    print(f"{'PASS' if ok else 'FAIL'} vmm_staging_buffer: mapped bytes equal {same}, bad sizes/descriptors "
          f"refused {refused}")
    return 0 if ok else 1


def run_concurrent(ev: InProcessEvaluator, report: dict) -> int:
    """Eight correct solutions, two in flight: timed regions are exclusive, so timings stay tight."""
    reqs = [EvalRequest(problem=RELU, solution=SOLUTION, config=CFG) for _ in range(8)]
    t = time.monotonic()
    results = asyncio.run(ev.evaluate_batch(reqs))
    wall = time.monotonic() - t
    meds = [r.sol_timing.median_ms for r in results if r.sol_timing]
    ok = all(r.status is Status.CORRECT for r in results) and len(meds) == 8
    spread = (max(meds) - min(meds)) / min(meds) if meds else None
    report["concurrent"] = {"ok": ok, "wall_s": wall, "sol_median_ms": meds, "relative_spread": spread}
    print(f"{'PASS' if ok else 'FAIL'} concurrent_batch_of_8: {wall:.2f}s, solution medians "
          f"{[round(m, 4) for m in meds]} ms, spread {spread if spread is None else f'{spread:.2%}'}")
    return 0 if ok else 1


def run_gold(ev: InProcessEvaluator, report: dict) -> int:
    problems = [p for p in load_builtin() if "gold.py" in p.metadata.get("solutions", {})]
    if not problems:
        print("SKIP gold solutions: the built-in suite has none on this checkout")
        return 0
    reqs = [EvalRequest(problem=p, solution=builtin_solution(p, "gold.py"), config=EvalConfig()) for p in problems]
    t = time.monotonic()
    results = asyncio.run(ev.evaluate_batch(reqs))
    failed = 0
    print(f"{'problem':40} {'status':14} {'speedup':>8} {'seconds':>8}  stages")
    for p, r in zip(problems, results):
        ok = r.status is Status.CORRECT
        failed += not ok
        report["gold"][p.key] = {"status": r.status.value, "speedup": r.speedup, "stages": r.stage_seconds,
                                 "hacks": [h.name for h in r.hacks], "error": r.error}
        stages = " ".join(f"{k}={v:.2f}" for k, v in r.stage_seconds.items())
        print(f"{p.key:40} {r.status.value:14} {r.speedup or 0:8.3f} {r.elapsed_s or 0:8.2f}  {stages}")
        if not ok:
            print("    " + (r.error or "").replace("\n", "\n    ")[-800:])
    print(f"{'PASS' if not failed else 'FAIL'} gold solutions: {len(problems) - failed}/{len(problems)} correct "
          f"in {time.monotonic() - t:.1f}s")
    return 1 if failed else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args()
    report: dict = {"cases": {}, "gold": {}}
    t = time.monotonic()
    with InProcessEvaluator(device="auto", concurrency=2, pool_size=2) as ev:
        info = ev.device_info()
        report["device"] = info
        print(f"device {info['name']} ({info['device']}), evaluator ready in {time.monotonic() - t:.1f}s")
        if not info["device"].startswith("cuda"):
            print("FAIL: no CUDA device visible to the judge")
            return 1
        failed = run_cases(ev, report)
        try:
            failed += run_vmm(report)
        except Exception as e:
            failed += 1
            print(f"FAIL run_vmm: raised {type(e).__name__}: {str(e)[-1500:]}")
        for step in (run_concurrent, run_gold):
            try:
                failed += step(ev, report)
            except Exception as e:
                failed += 1
                print(f"FAIL {step.__name__}: raised {type(e).__name__}: {str(e)[-1500:]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gym_gpu_checks.json").write_text(json.dumps(report, indent=1, default=str))
    print(f"{'PASS' if not failed else 'FAIL'}: gym GPU checks, {failed} failed; wrote {out / 'gym_gpu_checks.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
