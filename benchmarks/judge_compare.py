"""The judge's output comparison at full size: the plain path (`compare._plain_chunk`, a few passes)
against the careful path alone (every chunk checked for NaN and Inf placement first, ~25 passes and 5
host synchronisations per chunk), side by side on the same tensors.

A full-size KernelBench output is gigabytes (19_ReLU: 1.6 G float32 values, 6.4 GB), and the judge
compares one per trial, integrity run and sampled timed call (about 13 per evaluation), so this is
the judge's share of an export's round trip.

    PYTHONPATH=src python3 benchmarks/judge_compare.py --device cuda:0 --elements 1610612736
    PYTHONPATH=src python3 benchmarks/judge_compare.py --device cpu --elements 67108864
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from drkernel.gym.judge import compare


def timed(device: torch.device, fn, repeats: int) -> float:
    """Median seconds of ``fn()`` (device synchronised around each call)."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--elements", type=int, default=1 << 26)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="out/judge_compare.json")
    args = ap.parse_args()
    device = torch.device(args.device)
    ref = torch.randn(args.elements, device=device)
    out = ref + 1e-4 * torch.randn(args.elements, device=device)
    plain = compare._plain_chunk
    row: dict = {"device": str(device), "elements": args.elements, "gb": 4 * args.elements / 1e9,
                 "name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
    for name, chunk in (("plain", plain), ("careful", lambda *a: None)):
        compare._plain_chunk = chunk
        try:
            assert compare.compare_outputs(out, ref, "kernelgym").passed
            row[f"{name}_s"] = timed(device, lambda: compare.compare_outputs(out, ref, "kernelgym"),
                                     args.repeats)
        finally:
            compare._plain_chunk = plain
    row["speedup"] = row["careful_s"] / row["plain_s"]
    print(f"SUMMARY judge_compare {row['gb']:.2f} GB on {row['name']}: careful {row['careful_s']:.3f} s, "
          f"plain {row['plain_s']:.3f} s, x{row['speedup']:.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
