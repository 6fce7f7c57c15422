"""Is a measured solution time physically plausible? Decided by the orchestrator, so no torch here.

Two bounds, from the problem's bytes and FLOPs and the device's peak:

    floor_ms    = out_bytes / bandwidth                 no correct solution writes its outputs faster
    roofline_ms = sum over the reference's aten ops of max(flops / peak, bytes / bandwidth)

A solution timed below ``FLOOR_MARGIN x floor_ms`` or ``ROOFLINE_MARGIN x roofline_ms`` is
*suspicious*: the orchestrator has the candidate re-measure it, still inside the exclusive region,
with a device-wide synchronisation around every call (`drkernel.gym.harness.timing.time_synchronized`).
The verdict (hack 7) comes from the re-measurement: below the output floor even then, or far
slower than the events said (`missed_work`). Fusing many memory-bound ops can legitimately beat the sum of their
rooflines, so the roofline bound only asks for a re-measurement, never flags by itself.
"""

from __future__ import annotations

from typing import Any

BANDWIDTH = {"H100": 3.35e12, "H200": 4.8e12, "A100": 2.04e12}
"""Peak memory bandwidth in bytes/s by device family; an unknown device gets the largest."""
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16, "float8_e4m3fn": 1,
            "float8_e5m2": 1}
FLOOR_MARGIN = 0.5
"""Below this fraction of the output floor a time is impossible (noise and the peak's optimism stay
far above it)."""
ROOFLINE_MARGIN = 0.1
"""Below this fraction of the reference's roofline time a time is re-measured."""
WALL_RATIO = 1.5
WALL_SLACK_MS = 0.1
"""The one events-vs-wall bound (`missed_work`): a wall-clock time per call above ``WALL_RATIO x event
time + WALL_SLACK_MS`` means the CUDA events on the calling stream missed work (another stream, a
thread). Used twice, with the same numbers: the timed region's synchronised re-measurement against
its event median, and the integrity hook's batch (events around each call against the wall time
of the batch ending in a device-wide synchronisation, `drkernel.gym.candidate.profiling.hidden_work`).
The ratio leaves room for clock noise; the slack for what a synchronisation and a launch cost on
the host, which dominates for kernels of a few microseconds. The slack is the larger of the two the
checks had before they were one (0.1 ms, not 0.05): a false hack 7 costs an honest solution its
reward, a missed one is still bounded by the output floor and the profiler's stream check."""


def bandwidth_for(device_name: str) -> float:
    name = device_name.upper()
    for key, bandwidth in BANDWIDTH.items():
        if key in name:
            return bandwidth
    return max(BANDWIDTH.values())


def tree_bytes(tree: Any) -> int:
    """Bytes of the tensors in an encoded output tree (`drkernel.gym.ipc.encode_tree`)."""
    if not isinstance(tree, dict):
        return 0
    if tree.get("k") in ("tuple", "list"):
        return sum(tree_bytes(x) for x in tree.get("items") or ())
    if tree.get("k") != "tensor":
        return 0
    n = ITEMSIZE.get(str(tree.get("dtype")), 4)
    for s in tree.get("shape") or ():
        n *= max(int(s), 0)
    return n


def floor_ms(out_bytes: int, device_name: str) -> float:
    """Milliseconds needed to write ``out_bytes`` once at peak bandwidth."""
    return out_bytes / bandwidth_for(device_name) * 1e3


def impossible(median_ms: float, out_bytes: int, device_name: str) -> bool:
    """Faster than writing the outputs once at peak bandwidth allows."""
    return out_bytes > 0 and median_ms < FLOOR_MARGIN * floor_ms(out_bytes, device_name)


def suspicious(median_ms: float, out_bytes: int, device_name: str, roofline_ms: float | None) -> bool:
    """Fast enough to be re-measured (see the module docstring)."""
    if impossible(median_ms, out_bytes, device_name):
        return True
    return bool(roofline_ms) and median_ms < ROOFLINE_MARGIN * float(roofline_ms)


def missed_work(event_ms: float, wall_ms: float) -> bool:
    """A wall-clock time per call (ending in a device-wide synchronisation) far above what the events on
    the calling stream measured: work they did not see (hack 7). The bound is `WALL_RATIO` and
    `WALL_SLACK_MS`; exactly at the bound is not a hack."""
    return wall_ms > WALL_RATIO * event_ms + WALL_SLACK_MS


PROFILED_CALLS = 3
"""Timed calls under the profiler after the timed ones (`drkernel.gym.candidate.profiling.profiled_timing`)."""
PROFILED_RATIO = 1.5
PROFILED_KERNELS_RATIO = 1.25
PROFILED_SLACK_MS = 0.05
"""The profiled-vs-timed bounds (`profiled_apart`). Inside the exclusive region, right after the timed
calls, a few more calls run under the profiler's device activity tracing
(`drkernel.gym.candidate.profiling.profiled_timing`), which reports two times per call: the device time
of its kernels, and its span between CUDA events. An honest forward's kernels take no longer than its
timed median (which adds launch gaps and a cold L2), and its span is no shorter (tracing slows the
host's launches, and no head start hides them). A forward whose kernels under the profiler take more
than ``PROFILED_KERNELS_RATIO`` times its timed median (plus the slack), or whose profiled span is
``PROFILED_RATIO`` times shorter than the median, ran different work when profiled: the profiler's
kernels, and the time coverage read from them, are not the timed work (hack 7). The slack covers an
L2 left warm (a working set that fits the L2 is read in less) and timing noise on the shortest kernels.

The kernels' bound is the tighter one because a forward *can* tell the profiled calls from the timed
ones on the device (red team 18, a09, H100 2026-11-28: ``%globaltimer`` gaps between its own launches,
queued back to back behind the timed calls' head start, spread out as the host issues them under
tracing): whatever it runs in the timed calls must then take at least 1/1.25 of what the profiler saw,
so switching to cheaper work there (a vendor GEMM for the own one, red team 17 a03) gains at most a
quarter. Honest forwards on the H100 measured 0.94-1.00 (compute-bound GEMM, cross-entropy) and far
less where launches dominate the timed median."""


def profiled_apart(timed_ms: float, kernels_ms: float, span_ms: float | None = None) -> str | None:
    """Which way the timed median and the profiled calls differ beyond the bounds, or None: ``"timed
    faster"`` (the profiled calls' kernels alone took longer: the timed calls ran less, or cheaper,
    work) or ``"profiled faster"`` (even with the host's launches the profiled calls took less: the
    profiler saw less than was timed). ``span_ms`` missing: only the first bound."""
    if kernels_ms > PROFILED_KERNELS_RATIO * timed_ms + PROFILED_SLACK_MS:
        return "timed faster"
    if span_ms is not None and timed_ms > PROFILED_RATIO * span_ms + PROFILED_SLACK_MS:
        return "profiled faster"
    return None
