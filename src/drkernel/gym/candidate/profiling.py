"""GPU-only integrity measurements, run inside the candidate by the integrity hook.

* `profile_forward`: one ``forward`` under ``torch.profiler`` (CUDA activity): every kernel with its
  device time and stream; a kernel is the solution's own only when its name equals the name of a
  ``@triton.jit`` function defined in the solution (exact match, never a substring). Time coverage
  (docs/METHOD.md section 4) is computed from these records.
* `hidden_work`: the cross-check of the timing method (docs/METHOD.md section 7). Per call, CUDA
  events on the current stream bracket ``forward``; a wall clock around the whole batch ends with a
  device-wide synchronisation. Work on another stream or a thread does not sit between the events
  but does delay the synchronisation. Only measured here: the verdict decides whether wall time
  far above the event times is hack 7 (`drkernel.gym.verdict.plausibility.missed_work`), since
  anything the candidate decides about itself is a claim.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import torch

from drkernel.gym.verdict.plausibility import PROFILED_CALLS


def output_bytes(out: Any) -> int:
    if isinstance(out, torch.Tensor):
        return out.numel() * out.element_size()
    if isinstance(out, (tuple, list)):
        return sum(output_bytes(o) for o in out)
    return 0


def profile_forward(fn: Callable[..., Any], args: Sequence[Any], own_names: set[str],
                    own_kernels: Sequence[str] = ()) -> dict[str, Any]:
    """Kernels of one ``fn(*args)``: name, own, launches, device time (ms) and CUDA streams, plus the
    kernels that ran off the calling stream. A marker kernel launched by the harness on the current
    stream just before ``fn`` tells which profiler stream id that stream has; it is not counted.
    ``own_kernels``: a CUDA solution's ``__global__`` functions, matched by a record's base name
    (`drkernel.gym.cuda.attribution.base_name`: no return type, namespace, template or parameters)."""

    # The autograd profiler drives Kineto directly; ``torch.profiler.profile`` would import
    # torch._inductor and torch._dynamo on entry (seconds, and those imports are what hack 16 looks for).
    from torch.autograd.profiler import profile

    marker = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    with torch.no_grad(), profile(use_device="cuda", use_kineto=True, use_cpu=False) as prof:
        marker.add_(1)
        fn(*args)
        torch.cuda.synchronize()
    return device_kernels(prof, own_names, own_kernels)


def device_kernels(prof: Any, own_names: set[str], own_kernels: Sequence[str] = (), calls: int = 1,
                   own_launched: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The kernels a profile saw after its first device event (the harness's marker, whose stream is
    the caller's), per call of ``calls``: name, own, launches (rounded up), device time (ms), streams;
    and the kernels that ran off the caller's stream. Copies and fills the runtime issues (memcpy,
    memset) are left out. ``own_launched``: the own Triton launches per name the launch watch counted
    while the profile ran; a name that ran more often than that is shared with kernels the solution
    did not launch (a library's, or one named to pass for it): the shortest of its executions, as many
    as were launched, are own, the rest are listed apart as not own (``name_clash``)."""
    from drkernel.gym.cuda.attribution import base_name

    events = sorted((e for e in prof.kineto_results.events()
                     if e.device_type() == torch.autograd.DeviceType.CUDA
                     and not any(w in e.name().lower() for w in ("memcpy", "memset"))),
                    key=lambda e: e.start_ns())
    if not events:
        return {"kernels": [], "off_stream": []}
    home = int(events[0].device_resource_id())
    not_own = _foreign_namesakes(events[1:], own_names, own_launched)
    kernels: dict[str, dict[str, Any]] = {}
    off_stream = set()
    for e in events[1:]:
        name = e.name() + CLASH_SUFFIX if id(e) in not_own else e.name()
        own = id(e) not in not_own and (e.name() in own_names
                                        or (bool(own_kernels) and base_name(e.name()) in own_kernels))
        k = kernels.setdefault(name, {"name": name, "own": own, "launches": 0,
                                      "device_time_ms": 0.0, "streams": set()})
        k["launches"] += 1
        k["device_time_ms"] += e.duration_ns() / 1e6
        k["streams"].add(int(e.device_resource_id()))
        if int(e.device_resource_id()) != home:
            off_stream.add(e.name())
    for k in kernels.values():
        k["streams"] = sorted(k["streams"])
        k["launches"] = -(-k["launches"] // calls)
        k["device_time_ms"] /= calls
    clash = sorted({e.name() for e in events[1:] if id(e) in not_own})
    return {"kernels": list(kernels.values()), "off_stream": sorted(off_stream),
            **({"name_clash": clash} if clash else {})}


CLASH_SUFFIX = " [same name, not launched by the solution]"


def _foreign_namesakes(events: Sequence[Any], own_names: set[str],
                       own_launched: Mapping[str, int] | None) -> set[int]:
    """The ids of the events named like an own Triton kernel beyond the own launches of that name
    (the longest ones: what the solution did not launch is never counted as its own work)."""
    if own_launched is None:
        return set()
    by_name: dict[str, list[Any]] = {}
    for e in events:
        if e.name() in own_names:
            by_name.setdefault(e.name(), []).append(e)
    extra: set[int] = set()
    for name, runs in by_name.items():
        launched = max(0, int(own_launched.get(name, 0)))
        if len(runs) > launched:
            extra |= {id(e) for e in sorted(runs, key=lambda e: e.duration_ns())[launched:]}
    return extra


def _profiled_draws(draw: Callable[[int], list[Any]], first: int, calls: int, budget_bytes: int) -> list[list[Any]]:
    """Up to ``calls`` draws made ahead, as many as ``budget_bytes`` holds (always the first: the timed
    calls just drew its size), fewer where the device runs out of memory."""
    from drkernel.gym.harness.inputs import tensor_bytes

    draws = [draw(first)]
    size = max(1, tensor_bytes(draws[0]))
    try:
        for k in range(1, min(calls, max(1, budget_bytes // size))):
            draws.append(draw(first + k))
    except torch.cuda.OutOfMemoryError:
        pass
    return draws


def profiled_timing(fn: Callable[..., Any], draw: Callable[[int], list[Any]], first: int, device: torch.device,
                    own_names: set[str], own_kernels: Sequence[str] = (), calls: int = PROFILED_CALLS,
                    budget_bytes: int = 1 << 62,
                    own_counts: Callable[[], Mapping[str, int]] | None = None,
                    keep_last: bool = False) -> dict[str, Any]:
    """``calls`` more timed calls under the profiler's device activity tracing, each on its own draw
    ``draw(first + k)`` (drawn before tracing starts, so no draw's kernels count as the forward's; as
    many as ``budget_bytes`` holds, at least one):
    ``profiled_ms``, the device time of one call's kernels (their durations summed, per call: what the
    call ran, whatever the host's launches cost), ``profiled_span_ms``, the least time of a call
    between CUDA events on the calling stream (what the host's launches under tracing cost included),
    and the kernels of a call (`device_kernels`, time coverage's source). ``own_counts``: the launch
    watch's own launches per name so far, read before and after the profile (`device_kernels`).

    Called inside the exclusive region right after the timed calls: an honest forward's kernels take
    no longer there than its timed median (the median adds launch gaps and a cold L2), and its span
    no shorter (tracing slows the launches). A forward that recognises being profiled (the profiler's
    state, the latency it adds, anything else) and runs other work there than in the timed calls is
    timed twice: the verdict compares (`drkernel.gym.verdict.checks.profiled_timing_hacks`), and the
    kernels time coverage is read from are the ones that ran in this region. ``keep_last``: the last
    call's output, copied once tracing has ended (``kept``: its index -> the copy), goes to the judge
    like a sampled timed call's: a forward that skips its work in the calls it expects unsampled
    cannot skip it here as well without a wrong output, and doing it here puts its cost in the
    profiled time that is held against the timed median (red team 15)."""
    from torch.autograd.profiler import profile

    from drkernel.gym.harness.timing import snapshot

    draws = _profiled_draws(draw, first, calls, budget_bytes)
    calls = len(draws)
    spans = []
    marker = torch.zeros(1, device=device)
    torch.cuda.synchronize(device)
    before = dict(own_counts()) if own_counts is not None else None
    with torch.no_grad(), profile(use_device="cuda", use_kineto=True, use_cpu=False) as prof:
        marker.add_(1)
        for k in range(calls):
            args = draws[k]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn(*args)
            end.record()
            end.synchronize()
            spans.append(start.elapsed_time(end))
            draws[k] = args = None
            if k < calls - 1 or not keep_last:
                out = None
        torch.cuda.synchronize(device)
    kept = {first + calls - 1: snapshot(out)} if keep_last else {}  # copied outside the trace
    out = None
    launched = None if before is None else {n: c - before.get(n, 0) for n, c in own_counts().items()}
    found = device_kernels(prof, own_names, own_kernels, calls, launched)
    return {"profiled_ms": sum(k["device_time_ms"] for k in found["kernels"]), "profiled_span_ms": min(spans),
            "profiled_calls": calls, "kept": kept, **found}


BATCHES = 3
"""Batches of `hidden_work`: the one reported is the one whose wall time is closest to its events."""
BATCH_BUDGET_MS = 300.0
"""The wall time a batch of `hidden_work` aims at: a forward slower than a twentieth of it is called
fewer times per batch (`calls_within`), at least `BATCH_LEAST_CALLS`. A slow candidate's integrity
runs hold the device shared while every other candidate's timed region waits for them, and new
candidates wait behind those regions: one slow GEMM's 61 calls of this check (6.6 s) and the timed
regions queued behind it left the H100 idle for 20 s of a 45-s sustained run (2026-11-28)."""
BATCH_LEAST_CALLS = 3


def calls_within(calls: int, per_call_ms: float, budget_ms: float, least: int) -> int:
    """``calls``, or fewer where that many calls of ``per_call_ms`` each would take longer than
    ``budget_ms``, never fewer than ``least``. Worked cases (budget 300 ms, least 3): 20 calls of
    1 ms -> 20; of 50 ms -> 6; of 400 ms -> 3; a per-call time of 0 -> 20."""
    if per_call_ms <= 0:
        return calls
    return max(least, min(calls, int(budget_ms / per_call_ms)))


def hidden_work(fn: Callable[..., Any], args: Sequence[Any], calls: int = 20, batches: int = BATCHES) -> dict[str, Any]:
    """Summed event time and synchronised wall time over ``calls`` forwards (ms per call; fewer for a
    slow forward, `calls_within` the first call's wall), measured in ``batches`` batches; the batch
    whose wall time exceeds its events the least (``wall - 1.5 x events``) is reported, every batch's
    pair under ``batches``. Work on another stream or a thread delays every batch's synchronisation
    however many calls a batch has; a host descheduled in one batch (a loaded machine, a neighbour's
    compile) delays that batch only, and must not read as hidden work."""
    measured = []
    with torch.no_grad():
        t0 = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        calls = calls_within(calls, (time.perf_counter() - t0) * 1e3, BATCH_BUDGET_MS, BATCH_LEAST_CALLS)
        for _ in range(max(1, batches)):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
            t0 = time.perf_counter()
            for i in range(calls):
                starts[i].record()
                fn(*args)
                ends[i].record()
            torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) * 1e3 / calls
            measured.append((sum(s.elapsed_time(e) for s, e in zip(starts, ends)) / calls, wall))
    event_ms, wall_ms = min(measured, key=lambda m: m[1] - 1.5 * m[0])
    return {"event_ms": event_ms, "wall_ms": wall_ms, "calls": calls, "batches": [list(m) for m in measured]}

