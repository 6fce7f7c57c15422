"""GPU timing, the same method for reference (in the judge) and solution (in the candidate).

Per timed call: clone the inputs (or, where ``draw`` is given, draw the call's own, so that nothing of
one timed call's content is in the next and neither a cache nor an incremental update from the last
call saves work: `drkernel.gym.harness.inputs.TimedDraws`; the first calls' draws are made before the
exclusive region where memory allows, `ahead_calls`), flush L2 (write a buffer twice the L2 size), give
the device a head start, record the start event, call, record the end event. All events are read
after one synchronisation at the end, so the host never waits between calls. A synchronised wall
clock around the whole timed loop is kept as a cross-check (it includes the clones, draws, flushes
and head starts, so it is an upper bound per call).

The head start: before the start event the stream sleeps on the device (``torch.cuda._sleep``) for

    head_ms = min(head_start_max_ms, HEAD_START_FACTOR x p90(host issue time of the warm-up calls)
                                     + HEAD_START_SLACK_MS)

so the call's launches are already queued when the device reaches the start event. Without it the
events also measure the host's time to issue the launches (Python, Triton's launcher), which varies
with the host's load: a 10 us kernel behind a 30 us launch path moved by 5 % per call, and by tens of
percent on a host busy starting other candidates. Only work that does not read the inputs can hide
in the head start: reading them means waiting for the stream, sleep included.

When the timed calls stop (``rule``; they hold the device's exclusive region, which every other
candidate on the device waits for):

* ``adaptive`` (the default): blocks of ``min_calls``; after each, stop once the median's 95 %
  confidence interval from order statistics (`median_ci`) lies within ``precision`` of the median
  (`median_precision`), or when ``calls`` (cut by the wall budget) were timed. A steady kernel stops
  after one or two blocks; a noisy one gets every call. No distribution is assumed, so a heavy tail
  of slow calls widens the interval instead of being averaged in.
* ``fixed``: ``calls`` timed calls (cut by the budget); then, while the median's relative standard
  error (a robust estimate, `median_rse`) is above ``target_rse`` and fewer than ``max_calls`` were
  timed, another block of ``calls // 2``.

Under either rule the timed calls whose outputs are kept for the judge (``keep``) are those reached;
the adaptive rule also keeps each block's last call until it knows whether another block follows, so
the last timed call's output always reaches the judge (`drkernel.gym.seeds.kept_timed_calls`). And
one more, drawn uniformly among the calls actually made whenever the timing stops (`Reservoir`): the
planned random index is drawn among the calls the budget allows, so where the adaptive rule stopped
after 20 of 100 it was out of range four times in five, and a forward that did its work only in each
block's last call (the one always kept: block sizes are known) was caught one time in five (red team
19, a05).
"""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any, Callable, Collection, Sequence

import torch
import triton
import triton.language as tl

from drkernel.gym.harness.inputs import clone_args
from drkernel.gym.seeds import kept_timed_calls

HEAD_START_FACTOR = 2.0
"""Head start as a multiple of the host's issue time (p90 over the later warm-up calls)."""
HEAD_START_SLACK_MS = 0.02
"""Added to every head start: the stream's own latency between the sleep and the first launch."""
SLEEP_CALIBRATION_CYCLES = 1_000_000
MEDIAN_CI_Z = 1.96
"""The normal quantile of the adaptive rule's confidence interval on the median (95 %)."""
AHEAD_BLOCKS = 2
"""The adaptive rule's blocks whose inputs are drawn before the exclusive region (`ahead_calls`)."""
_sleep_cycles_per_ms: dict[int, float] = {}


@triton.jit
def warm_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """Launched once by a warm candidate so the first launch of a solution is not its first launch."""
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def median_rse(times_ms: Sequence[float]) -> float:
    """Relative standard error of the median of per-call times, robust to outliers:

        rse = sqrt(pi / 2) x (IQR / 1.349) / (median x sqrt(n))

    (the median's standard error for a normal sample, with its sigma estimated from the IQR)."""
    xs = sorted(float(t) for t in times_ms)
    if len(xs) < 2:
        return math.inf
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return _rse(q[2] - q[0], statistics.median(xs), len(xs))


def median_ci(times_ms: Sequence[float]) -> tuple[float, float]:
    """A distribution-free 95 % confidence interval of the median: the order statistics of ranks
    (1-based, clipped to 1..n)

        j = floor(n/2 - z sqrt(n)/2),   k = ceil(1 + n/2 + z sqrt(n)/2),   z = `MEDIAN_CI_Z`

    (the count of samples below the true median is Binomial(n, 1/2), in its normal approximation).
    n = 10: the smallest and the largest; n = 20: the 5th and the 16th smallest; n = 100: the 40th and
    the 61st."""
    xs = sorted(float(t) for t in times_ms)
    n = len(xs)
    if n == 0:
        raise ValueError("no timings")
    half = MEDIAN_CI_Z * math.sqrt(n) / 2
    j = max(1, math.floor(n / 2 - half))
    k = min(n, math.ceil(1 + n / 2 + half))
    return xs[j - 1], xs[k - 1]


def median_precision(times_ms: Sequence[float]) -> float:
    """The larger distance from the median to an end of its `median_ci`, relative to the median
    (inf for fewer than 2 calls or a median of 0)."""
    if len(times_ms) < 2:
        return math.inf
    median = statistics.median(float(t) for t in times_ms)
    if median <= 0:
        return math.inf
    lo, hi = median_ci(times_ms)
    return max(median - lo, hi - median) / median


def _rse(iqr: float, median: float, n: int) -> float:
    if n < 2 or median <= 0:
        return math.inf
    return math.sqrt(math.pi / 2) * (iqr / 1.349) / (median * math.sqrt(n))


def head_start_ms(warmup_host_ms: Sequence[float], max_ms: float) -> float:
    """The head start for a function whose warm-up calls took ``warmup_host_ms`` to issue on the
    host (see the module docstring). The first half of the warm-up (compilation, autotuning, caches
    filling) is left out; with no warm-up to go by, the maximum."""
    if max_ms <= 0:
        return 0.0
    later = sorted(warmup_host_ms[len(warmup_host_ms) // 2:])
    if not later:
        return max_ms
    p90 = later[min(len(later) - 1, math.ceil(0.9 * len(later)) - 1)]
    return min(max_ms, HEAD_START_FACTOR * p90 + HEAD_START_SLACK_MS)


def summarize(times_ms: Sequence[float], wall_ms_per_call: float | None = None, **extra: Any) -> dict[str, Any]:
    """Median, IQR, coefficient of variation (std / mean), mean and min of per-call times, the
    median's relative standard error, the sorted times (``samples_ms``: the speedup's interval,
    `drkernel.gym.speedup`), plus ``extra`` (head start, host issue time, ...)."""
    xs = sorted(float(t) for t in times_ms)
    n = len(xs)
    if n == 0:
        raise ValueError("no timings")
    mean = sum(xs) / n
    std = statistics.pstdev(xs) if n > 1 else 0.0
    q = statistics.quantiles(xs, n=4, method="inclusive") if n > 1 else [xs[0]] * 3
    median = statistics.median(xs)
    rse = _rse(q[2] - q[0], median, n)
    return {"median_ms": median, "iqr_ms": q[2] - q[0], "cv": std / mean if mean > 0 else 0.0,
            "mean_ms": mean, "min_ms": xs[0], "n": n, "wall_ms_per_call": wall_ms_per_call,
            "rse": rse if math.isfinite(rse) else None, "samples_ms": xs, **extra}


class L2Flusher:
    """Writes a buffer of twice the device's L2 size; one per process and device."""

    def __init__(self, device: torch.device) -> None:
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or (50 << 20))
        self.buf = torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)

    def __call__(self) -> None:
        self.buf.zero_()


def sleep_cycles_per_ms(device: torch.device) -> float:
    """Cycles of ``torch.cuda._sleep`` per millisecond on ``device``, measured once per process."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _sleep_cycles_per_ms:
        torch.cuda._sleep(SLEEP_CALIBRATION_CYCLES // 10)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(SLEEP_CALIBRATION_CYCLES)
        end.record()
        end.synchronize()
        _sleep_cycles_per_ms[index] = SLEEP_CALIBRATION_CYCLES / max(start.elapsed_time(end), 1e-3)
    return _sleep_cycles_per_ms[index]


def time_cuda(fn: Callable[..., Any], inputs: Sequence[Any], *, warmup: int, calls: int, l2_flush: bool,
              device: torch.device, flusher: L2Flusher | None = None, keep: Collection[int] = (),
              kept: dict[int, Any] | None = None, head_start_max_ms: float = 0.0,
              max_calls: int | None = None, target_rse: float = 0.0, budget_ms: float = 0.0,
              min_calls: int = 10, rule: str = "fixed", precision: float = 0.0,
              draw: Callable[[int], list[Any]] | None = None) -> dict[str, Any]:
    """Per-call device times of ``fn(*clone(inputs))`` (see the module docstring).

    ``keep``: indices of timed calls whose outputs are stored into ``kept`` (index -> output), so the
    judge can check that timed calls compute the right thing, not only the calls it saw before.
    ``head_start_max_ms``: cap of the head start (0: none). ``rule``, ``precision``, ``max_calls``,
    ``target_rse``: when the timed calls stop (module docstring). ``draw(i)``: timed call ``i``'s own
    inputs, drawn before its flush (or handed over, drawn before the region), in place of a clone of ``inputs``. ``budget_ms``/``min_calls``: fewer
    timed calls (not below ``min_calls``) where the warm-up's wall per call says ``calls`` of them would
    take longer than ``budget_ms``; ``keep`` is then mapped by `drkernel.gym.seeds.kept_timed_calls`.

    The stats add ``head_start_ms``, ``host_ms`` (median host time to issue one timed call),
    ``inputs_ms`` (median host time to make one timed call's inputs: a clone, or ``draw``) and
    ``uncovered`` (share of timed calls whose issue took longer than the head start)."""
    flush = (flusher or L2Flusher(device)) if l2_flush else None
    adaptive = rule == "adaptive"
    with torch.no_grad():
        issue_ms, per_call_ms = _warm_up(fn, inputs, warmup, device, measure=budget_ms > 0)
        planned = calls
        calls = budgeted_calls(calls, per_call_ms, budget_ms, min_calls)
        keep = kept_timed_calls(keep, planned, calls)
        # the adaptive rule stops within ``calls``; the fixed one extends, but never past the budget
        limit = calls if adaptive or calls < planned else max(calls, max_calls or calls)
        head_ms = head_start_ms(issue_ms, head_start_max_ms)
        sleep_cycles = int(head_ms * sleep_cycles_per_ms(device)) if head_ms > 0 else 0
        host: list[float] = []
        drawn: list[float] = []
        times: list[float] = []
        wall_ms = 0.0
        size = min(min_calls, calls) if adaptive else max(1, calls // 2)  # of the blocks after the first
        block = size if adaptive else calls
        sample = Reservoir() if kept is not None else None
        while block > 0:
            t0 = time.perf_counter()
            pairs = _timed_block(fn, inputs, block, flush, sleep_cycles, host, keep, kept, keep_last=adaptive,
                                 draw=draw, drawn=drawn, sample=sample)
            torch.cuda.synchronize(device)
            wall_ms += (time.perf_counter() - t0) * 1e3
            times.extend(s.elapsed_time(e) for s, e in pairs)
            block = next_block(times, limit, adaptive, size, precision if adaptive else target_rse)
            last = len(times) - 1
            if block and kept is not None and last not in keep and last != sample.index:
                kept.pop(last, None)  # the block's last call was not the last one after all
    return summarize(times, wall_ms / len(times), head_start_ms=head_ms, host_ms=statistics.median(host),
                     inputs_ms=statistics.median(drawn), uncovered=sum(h > head_ms for h in host) / len(host))


class Reservoir:
    """One timed call kept uniformly at random among all the calls made so far, decided as each call
    ends (reservoir sampling: call ``i`` becomes the sample with probability ``1 / (i + 1)``), so the
    sample is uniform over the calls made however many the timing rule makes. The draws come from the
    operating system: nothing in the process predicts them."""

    def __init__(self) -> None:
        self._rng = random.SystemRandom()
        self.index: int | None = None
        self.dropped: int | None = None  # the sample ``offer`` just replaced

    def offer(self, i: int) -> bool:
        """Call ``i`` (0-based, in order) ended: True when it is the sample now."""
        if self._rng.randrange(i + 1):
            return False
        self.dropped, self.index = self.index, i
        return True


def next_block(times_ms: Sequence[float], limit: int, adaptive: bool, size: int, target: float) -> int:
    """How many calls to time next (0: stop) after ``times_ms``, at most ``limit`` in all: the adaptive
    rule goes on while `median_precision` is above ``target``, the fixed one while `median_rse` is
    (``target`` 0: the fixed rule stops at once)."""
    n = len(times_ms)
    if n >= limit or target <= 0:
        return 0
    spread = median_precision(times_ms) if adaptive else median_rse(times_ms)
    return min(size, limit - n) if spread > target else 0


def _warm_up(fn: Callable[..., Any], inputs: Sequence[Any], warmup: int, device: torch.device,
             measure: bool) -> tuple[list[float], float]:
    """``warmup`` untimed calls: the host's time to issue each (ms) and, with ``measure``, the wall per
    call from an idle stream (0 otherwise: the budget then keeps every call)."""
    issue_ms: list[float] = []
    if measure:
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(warmup):
        args = clone_args(inputs)
        t = time.perf_counter()
        fn(*args)
        issue_ms.append((time.perf_counter() - t) * 1e3)
        del args
    torch.cuda.synchronize(device)
    per_call_ms = (time.perf_counter() - t0) * 1e3 / warmup if measure and warmup > 0 else 0.0
    return issue_ms, per_call_ms


def _timed_block(fn: Callable[..., Any], inputs: Sequence[Any], block: int, flush: L2Flusher | None,
                 sleep_cycles: int, host: list[float], keep: Collection[int], kept: dict[int, Any] | None,
                 keep_last: bool, draw: Callable[[int], list[Any]] | None = None,
                 drawn: list[float] | None = None, sample: Reservoir | None = None) -> list[tuple[Any, Any]]:
    """Issue ``block`` timed calls (their indices follow ``host``'s length), append each one's host
    issue time to ``host`` and its inputs' host time (a clone or a draw) to ``drawn``, store the outputs
    of ``keep``, of the block's last with ``keep_last``, and of ``sample``'s pick (the one it replaced
    dropped first: one sample's memory at a time) into ``kept``; returns the calls' (start, end)
    events, unsynchronised."""
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
             for _ in range(block)]
    last = len(host) + block - 1
    drawn = [] if drawn is None else drawn
    for start, end in pairs:
        i = len(host)
        t = time.perf_counter()
        args = clone_args(inputs) if draw is None else draw(i)
        drawn.append((time.perf_counter() - t) * 1e3)
        if flush is not None:
            flush()
        if sleep_cycles:
            torch.cuda._sleep(sleep_cycles)
        start.record()
        t = time.perf_counter()
        out = fn(*args)
        host.append((time.perf_counter() - t) * 1e3)
        end.record()
        sampled = sample is not None and sample.offer(i)
        if kept is not None and sampled and sample.dropped is not None and sample.dropped not in keep:
            kept.pop(sample.dropped, None)
        if kept is not None and (i in keep or (keep_last and i == last) or sampled):
            kept[i] = snapshot(out)
        del args, out  # one clone alive at a time: full-size inputs can be gigabytes
    return pairs


def snapshot(out: Any) -> Any:
    """A kept timed call's output as it stands at the end of its call: its tensors copied on the
    device (queued after the call's end event: untimed), the solution's own objects dropped like any
    other call's. Kept as they were, the outputs the judge samples were the only ones whose memory
    the caching allocator never handed back, which a solution can test at its next call, and then
    finish only those (deferred work the timed calls never paid for). Exact tuples and lists keep
    their shape; other values are kept as they are (the export judges them)."""
    if type(out) in (tuple, list):
        return type(out)(snapshot(v) for v in out)
    if isinstance(out, torch.Tensor):
        with torch._C.DisableTorchFunction():  # a subclass's code does not run here
            return torch.Tensor.clone(torch.Tensor.detach(out))
    return out


def timing_options(cfg: dict[str, Any]) -> dict[str, Any]:
    """`time_cuda`'s head-start, stopping and budget arguments from an `EvalConfig` dict (or a judge
    request; one without a ``timing_rule`` is timed by the fixed rule)."""
    return {"head_start_max_ms": float(cfg.get("head_start_max_ms", 0.0)),
            "max_calls": int(cfg.get("timed_calls_max") or 0) or None,
            "target_rse": float(cfg.get("timing_target_rse", 0.0)),
            "budget_ms": float(cfg.get("timing_budget_ms", 0.0)),
            "min_calls": int(cfg.get("timed_calls_min", 10)),
            "rule": str(cfg.get("timing_rule", "fixed")),
            "precision": float(cfg.get("timing_precision", 0.0))}


def ahead_calls(calls: int, options: dict[str, Any]) -> int:
    """How many timed calls' inputs to draw before the exclusive region (`time_cuda`'s ``draw``,
    `drkernel.gym.harness.inputs.TimedDraws.ahead`), of ``calls`` planned, with `timing_options`'
    ``options``: the adaptive rule's first `AHEAD_BLOCKS` blocks (a steady kernel stops after one or
    two; a later call's inputs are drawn in the region, at its call), every call the fixed rule may time.
    100 calls, blocks of 10: 20 adaptive; 100 fixed, 150 with ``max_calls`` 150."""
    if options["rule"] == "adaptive":
        return min(calls, AHEAD_BLOCKS * min(options["min_calls"], calls))
    return max(calls, options["max_calls"] or calls)


def budgeted_calls(calls: int, per_call_ms: float, budget_ms: float, min_calls: int) -> int:
    """How many of ``calls`` timed calls fit ``budget_ms`` at ``per_call_ms`` each, never fewer than
    ``min(min_calls, calls)`` (0 budget, or an unmeasured call: all of them)."""
    if budget_ms <= 0 or not per_call_ms > 0:
        return calls
    return max(min(min_calls, calls), min(calls, int(budget_ms // per_call_ms)))


def time_synchronized(fn: Callable[..., Any], inputs: Sequence[Any], *, calls: int, l2_flush: bool,
                      device: torch.device, flusher: L2Flusher | None = None,
                      draw: Callable[[int], list[Any]] | None = None) -> dict[str, Any]:
    """Per-call wall times of ``fn(*clone(inputs))`` between two device-wide synchronisations.

    The re-measurement of an implausibly fast solution: whatever stream or thread does the work,
    the device is idle before the clock starts and idle again before it stops."""
    flush = (flusher or L2Flusher(device)) if l2_flush else None
    times = []
    with torch.no_grad():
        fn(*clone_args(inputs))
        for i in range(calls):
            args = clone_args(inputs) if draw is None else draw(i)
            if flush is not None:
                flush()
            torch.cuda.synchronize()
            t = time.perf_counter()
            out = fn(*args)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t) * 1e3)
            del args, out
    return summarize(times)
