"""Wall time of every KernelBench reference after CPU scale-down (target: each under 2 s on 2 cores).

Usage: python benchmarks/cpu_reference_times.py [rows.jsonl]
"""

from __future__ import annotations

import sys
import time

import torch

from drkernel.problems import load_rows
from drkernel.problems.scaling import scale_for_cpu


def main(path: str = "tests/data/kernelbench_level1_level2.jsonl") -> None:
    torch.set_num_threads(2)
    times = []
    for p in load_rows(path):
        scaled = scale_for_cpu(p)
        ns = {"__name__": "ref"}
        exec(compile(scaled.code, p.name, "exec"), ns)
        torch.manual_seed(0)
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = ns["get_inputs"]()
        start = time.perf_counter()
        with torch.no_grad():
            model(*inputs)
        times.append((time.perf_counter() - start, p.key))
    times.sort(reverse=True)
    print(f"{len(times)} references; slowest:")
    for t, key in times[:5]:
        print(f"  {t:6.2f} s  {key}")
    print(f"over 2 s: {sum(t > 2.0 for t, _ in times)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
