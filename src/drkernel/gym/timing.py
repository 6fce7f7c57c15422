"""GPU timing, the same method for reference (in the judge) and solution (in the candidate).

Per timed call: clone the inputs, flush L2 (write a buffer twice the L2 size), record the start
event, call, record the end event. All events are read after one synchronisation at the end, so
the host never waits between calls. A synchronised wall clock around the whole timed loop is kept
as a cross-check (it includes the clones and flushes, so it is an upper bound per call).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Collection, Sequence

import torch
import triton
import triton.language as tl

from drkernel.gym.inputs import clone_args


@triton.jit
def warm_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """Launched once by a warm candidate so the first launch of a solution is not its first launch."""
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def summarize(times_ms: Sequence[float], wall_ms_per_call: float | None = None) -> dict[str, Any]:
    """Median, IQR, coefficient of variation (std / mean), mean and min of per-call times."""
    xs = sorted(float(t) for t in times_ms)
    n = len(xs)
    if n == 0:
        raise ValueError("no timings")
    mean = sum(xs) / n
    std = statistics.pstdev(xs) if n > 1 else 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive") if n > 1 else [xs[0]] * 3
    return {"median_ms": statistics.median(xs), "iqr_ms": q[2] - q[0], "cv": std / mean if mean > 0 else 0.0,
            "mean_ms": mean, "min_ms": xs[0], "n": n, "wall_ms_per_call": wall_ms_per_call}


class L2Flusher:
    """Writes a buffer of twice the device's L2 size; one per process and device."""

    def __init__(self, device: torch.device) -> None:
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def time_cuda(fn: Callable[..., Any], inputs: Sequence[Any], *, warmup: int, calls: int, l2_flush: bool,
              device: torch.device, flusher: L2Flusher | None = None, keep: Collection[int] = (),
              kept: dict[int, Any] | None = None) -> dict[str, Any]:
    """Per-call device times of ``fn(*clone(inputs))`` (see the module docstring).

    ``keep``: indices of timed calls whose outputs are stored into ``kept`` (index -> output), so the
    judge can check that timed calls compute the right thing, not only the calls it saw before."""
    flush = (flusher or L2Flusher(device)) if l2_flush else None
    with torch.no_grad():
        for _ in range(warmup):
            fn(*clone_args(inputs))
        torch.cuda.synchronize(device)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        t0 = time.perf_counter()
        for i in range(calls):
            args = clone_args(inputs)
            if flush is not None:
                flush()
            starts[i].record()
            out = fn(*args)
            ends[i].record()
            if kept is not None and i in keep:
                kept[i] = out
            del args, out  # one clone alive at a time: full-size inputs can be gigabytes
        torch.cuda.synchronize(device)
        wall = (time.perf_counter() - t0) * 1e3 / calls
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)], wall)


def time_synchronized(fn: Callable[..., Any], inputs: Sequence[Any], *, calls: int, l2_flush: bool,
                      device: torch.device, flusher: L2Flusher | None = None) -> dict[str, Any]:
    """Per-call wall times of ``fn(*clone(inputs))`` between two device-wide synchronisations.

    The re-measurement of an implausibly fast solution: whatever stream or thread does the work,
    the device is idle before the clock starts and idle again before it stops."""
    flush = (flusher or L2Flusher(device)) if l2_flush else None
    times = []
    with torch.no_grad():
        fn(*clone_args(inputs))
        for _ in range(calls):
            args = clone_args(inputs)
            if flush is not None:
                flush()
            torch.cuda.synchronize()
            t = time.perf_counter()
            out = fn(*args)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
            del args, out
    return summarize(times)
