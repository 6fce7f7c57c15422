"""GPU checks of the newcomer's path (run by scripts/gpu_check.sh, tag ``newcomer``; torch, triton, numpy).

What the CPU tests cannot show: the built-in ``broken_compile_error`` file is a ``compile_error`` on the
GPU too (the CPU rule in gym/verdict/classify.py must agree with the real compiler), the gold solution of the
same problem is valid there, and the CLI's device check lets ``cuda`` through and refuses a device
index past the last. Prints PASS/FAIL lines, writes ``$OUT/newcomer_gpu.json``, exits 1 on a failure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from drkernel.errors import ConfigError
from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator, Status
from drkernel.problems import builtin_solution, load_builtin


def device_checks() -> list[tuple[str, bool, str]]:
    try:
        from drkernel.cli.devices import require_local_device  # the cli package imports typer and rich
    except ImportError as e:
        return [("device check (skipped: the CLI's dependencies are not installed)", True, str(e))]
    out = []
    try:
        require_local_device("cuda")
        out.append(("--device cuda accepted on a GPU host", True, ""))
    except ConfigError as e:
        out.append(("--device cuda accepted on a GPU host", False, str(e)))
    past = f"cuda:{torch.cuda.device_count()}"
    try:
        require_local_device(past)
        out.append((f"--device {past} refused", False, "accepted"))
    except ConfigError as e:
        out.append((f"--device {past} refused", "visible" in str(e), str(e)))
    return out


def eval_checks() -> list[tuple[str, bool, str]]:
    problem = next(p for p in load_builtin([2]) if p.name == "layernorm_gelu")
    expect = {"broken_compile_error.py": Status.COMPILE_ERROR, "gold.py": Status.CORRECT}
    out = []
    with InProcessEvaluator(device="cuda", concurrency=1, pool_size=0) as ev:
        for filename, status in expect.items():
            r = ev.evaluate(EvalRequest(problem=problem, solution=builtin_solution(problem, filename),
                                        config=EvalConfig(device="cuda", trials=2)))
            out.append((f"layernorm_gelu/{filename} is {status.value}", r.status is status,
                        f"got {r.status.value}: {(r.error or '').strip().splitlines()[-1:] }"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="out")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("FAIL no CUDA device: this section needs a GPU")
        return 1
    checks = device_checks() + eval_checks()
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'} {name}" + ("" if ok else f": {detail}"))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "newcomer_gpu.json").write_text(
        json.dumps([{"check": n, "passed": ok, "detail": d} for n, ok, d in checks], indent=1))
    failed = [n for n, ok, _ in checks if not ok]
    print(f"SUMMARY newcomer: {len(checks) - len(failed)} of {len(checks)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
