"""Where a candidate child's start-up time goes (GPU): each warm-up step timed in fresh processes,
one alone and then N started together (as a warm pool refills). Needs only torch and triton.

    PYTHONPATH=src python3 benchmarks/child_start.py [--parallel 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

STEPS = r"""
import json, time, importlib
t = time.perf_counter(); marks = {}
def mark(name):
    global t
    now = time.perf_counter(); marks[name] = round(now - t, 3); t = now
import torch; mark("import torch")
import triton; mark("import triton")
torch.cuda.init(); torch.zeros(1, device="cuda"); torch.cuda.synchronize(); mark("cuda context")
from drkernel.gym.harness.timing import warm_kernel; mark("import harness")
x = torch.zeros(16, device="cuda"); warm_kernel[(1,)](x, 16, BLOCK=16); torch.cuda.synchronize(); mark("first launch")
from drkernel.gym.candidate.profiling import profile_forward
profile_forward(lambda v: v.add_(1), [x], set()); mark("first profiler pass")
import sys; marks["torch._dynamo imported"] = float("torch._dynamo" in sys.modules)
print(json.dumps(marks))
"""


def run(n: int) -> tuple[float, list[dict]]:
    t = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", STEPS], stdout=subprocess.PIPE, text=True) for _ in range(n)]
    outs = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return time.perf_counter() - t, outs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parallel", type=int, default=4)
    args = ap.parse_args()
    for n in (1, args.parallel):
        wall, outs = run(n)
        print(f"{n} process(es) started together: {wall:.2f} s wall")
        for step in outs[0]:
            print(f"  {step:24} " + " ".join(f"{o[step]:6.2f}" for o in outs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
