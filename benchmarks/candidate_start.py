"""Where a candidate's start-up goes (issue 14): each step of a cold start measured apart, in fresh
processes, side by side in one run.

Steps, each a fresh ``python -c`` (so each includes the ones before it):
  python           interpreter start
  torch            + import torch
  triton           + import triton and the harness's timing module
  cuda             + CUDA context (one tensor on the device, synchronised)
  warm_empty       + the harness's warm-up kernel launched with an empty Triton cache (what a sandboxed
                     candidate pays: its cache is private and starts empty)
  warm_seeded      the same with the cache seeded from a copy of one made by an earlier child
  fork_cuda        a process with torch and triton imported forks; the child creates its CUDA
                     context and launches the warm-up kernel (seeded cache): what a zygote would pay
Then ``parallel``: N warm_seeded starts at once (contention for the cores).

    PYTHONPATH=src python3 benchmarks/candidate_start.py [--device cuda:0] [--repeats 3] [--parallel 8] [--out out/candidate_start.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPORTS = "import torch; import triton; from drkernel.gym.harness.timing import warm_kernel"
CUDA = "x = torch.zeros(16, device={dev!r}); torch.cuda.synchronize()"
WARM = "warm_kernel[(1,)](x, 16, BLOCK=16); torch.cuda.synchronize()"
STEPS = {
    "python": "pass",
    "torch": "import torch",
    "triton": IMPORTS,
    "cuda": IMPORTS + "; " + CUDA,
    "warm_empty": IMPORTS + "; " + CUDA + "; " + WARM,
}
FORK = IMPORTS + """
import os, time
r, w = os.pipe()
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    x = torch.zeros(16, device={dev!r}); torch.cuda.synchronize()
    warm_kernel[(1,)](x, 16, BLOCK=16); torch.cuda.synchronize()
    os.write(w, b"x"); os._exit(0)
os.read(r, 1)
print("FORKED", time.perf_counter() - t)
os.waitpid(pid, 0)
"""


def run(code: str, cache: str) -> tuple[float, str]:
    env = {**os.environ, "TRITON_CACHE_DIR": cache}
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, out.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "out"), "candidate_start.json"))
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="drkernel-start-"))
    seed = root / "seed"
    run(STEPS["warm_empty"].format(dev=args.device), str(seed))  # the seed cache, made once
    res: dict[str, list[float]] = {k: [] for k in [*STEPS, "warm_seeded", "fork_cuda"]}
    for i in range(args.repeats):
        for name, code in STEPS.items():
            res[name].append(run(code.format(dev=args.device), str(root / f"{name}-{i}"))[0])
        cache = root / f"seeded-{i}"
        t = time.perf_counter()
        shutil.copytree(seed, cache)
        copy_s = time.perf_counter() - t
        res["warm_seeded"].append(run(STEPS["warm_empty"].format(dev=args.device), str(cache))[0] + copy_s)
        _, out = run(FORK.format(dev=args.device), str(cache))
        res["fork_cuda"].append(float(out.split("FORKED")[1].split()[0]))
    t = time.perf_counter()
    procs = []
    for i in range(args.parallel):
        cache = root / f"par-{i}"
        shutil.copytree(seed, cache)
        procs.append(subprocess.Popen([sys.executable, "-c", STEPS["warm_empty"].format(dev=args.device)],
                                      env={**os.environ, "TRITON_CACHE_DIR": str(cache)}))
    for p in procs:
        p.wait()
    parallel_s = time.perf_counter() - t
    shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in res.items()}
    report = {"device": args.device, "repeats": args.repeats, "median_s": med, "raw_s": res,
              "parallel": {"n": args.parallel, "wall_s": parallel_s, "starts_per_s": args.parallel / parallel_s}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    prev = 0.0
    for k in STEPS:
        print(f"SUMMARY {k:12} {med[k]:6.3f} s  (+{med[k] - prev:.3f})")
        prev = med[k]
    print(f"SUMMARY warm_seeded  {med['warm_seeded']:6.3f} s  (empty cache: {med['warm_empty']:.3f})")
    print(f"SUMMARY fork_cuda    {med['fork_cuda']:6.3f} s  (fork of an imported process to a warm kernel)")
    print(f"SUMMARY parallel     {args.parallel} seeded starts in {parallel_s:.2f} s "
          f"({args.parallel / parallel_s:.2f} starts/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
