"""A per-problem tolerance derived from the reference itself (run by the judge).

A profile's fixed ``atol`` (``kernelgym``: 1e-2) hides any output whose values are small next to it:
all zeros pass a row mean of ``randn`` rows, or a term dropped below atol passes. So per output
leaf the judge tightens the profile's absolute term to what the reference's own numbers support:

    err   = max |ref - ref64|            the reference's own fp32 (or fp16) error, against an fp64
                                         run of the same reference on the same inputs
    scale = mean |ref64|                 over finite values: the size of a typical output
    atol' = min(atol, max(ERROR_FACTOR * err, rtol * scale))

and a value passes when ``|out - ref| <= atol' + rtol * |ref|``. ``rtol`` is the profile's, except for an
aggregate (an output with at most 1/`AGGREGATE_INPUTS` as many values as the inputs: a loss, a norm,
a row sum or mean, a matrix-vector product), whose ``rtol' = min(rtol, max(AGGREGATE_RTOL, ERROR_FACTOR
* err / scale))``, never below `OUTPUT_STEPS` steps of the output dtype: a 1 % band around values that
each sum hundreds of terms lets a kernel that reads only part of them pass (a mean over 7/8 of the
rows of a cross-entropy is off by about 0.15 %), or one that replaces them by a cheaper formula
accurate to a few tenths of a percent on the trial inputs (red team 15: the row sum of sigmoids of a
GEMM as its first-order expansion, a matrix-vector product, 0.2 % off where the honest kernel is
4e-7 off). An
honest kernel differs from the reference by about the reference's own rounding error (a few times
``err``) or by ``rtol`` of a typical value, so it keeps passing; an answer that is wrong by more
than 1% of a typical output no longer hides below a fixed atol.

Degenerate: with ``atol'`` applied, the judge tries trivial answers against the reference -- all
zeros, the output's mean as a constant, each input of the output's shape -- and names the first that
passes (the constant only for more than one value: a single value is its own mean). A problem whose
reference is met by a trivial answer cannot tell computing from not computing; its trials say so
(``Verdict.degenerate``) instead of passing silently, and a variant input distribution on which it
is so is not drawn (`drkernel.gym.judge.main.Judge.defined_distributions`).

The fp64 run is the judge's (trusted) work: one more reference run per problem and input seed,
cached by the judge with the per-leaf numbers it yields (`LeafTolerance`), never the tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from drkernel.gym.config import tolerance_for

CHUNK = 1 << 25
ERROR_FACTOR = 16.0
"""How many times the reference's own rounding error (against fp64) an honest kernel may show."""
AGGREGATE_INPUTS = 64
"""An output leaf with at most 1/this as many values as the inputs' floating values is an aggregate
(each value sums or selects from many inputs): its relative term is derived too. Elementwise outputs,
GEMMs, convolutions and normalisations (as many values as their inputs, or nearly) are not."""
AGGREGATE_RTOL = 1e-4
"""The least relative term of an aggregate: far above an fp32 reduction's rounding over any order
(a TF32 or fp16-tile matmul inside it has its own slack, `compare`), far below the error of a mean
estimated from part of its inputs (7/8 of 8192 rows: about 1.5e-3) or of a first-order expansion."""
OUTPUT_STEPS = 2.0
"""An aggregate's relative term is never below this many steps of its output dtype (``finfo.eps``):
a kernel rounds its own sum to the output's grid, one step from the reference's where the two sums
differ in their last fp32 bits. The fp64 run cannot show that where the reference casts explicitly
(``x.float().sum(-1).half()`` rounds both runs to the same fp16 grid, so ``err`` is about 0): an
honest fp16 row sum one step off (-30.73 for -30.75) was judged incorrect at 1e-4 (honest round 13).
For fp32 outputs the floor is 2.4e-7, below `AGGREGATE_RTOL`: nothing changes there."""


@dataclass(frozen=True)
class LeafTolerance:
    """The bound of one output leaf: ``|out - ref| <= atol + rtol * |ref|``."""

    atol: float
    rtol: float
    ref_error: float | None  # max |ref - ref64| (None: no fp64 run, the profile's atol applies)
    scale: float             # mean |ref| over finite values
    degenerate: str | None = None  # a trivial answer that passes at this bound


def leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def to_double(value: Any) -> Any:
    """Floating tensors of a tree as float64 (others unchanged)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.double()
    if isinstance(value, (list, tuple)):
        return type(value)(to_double(v) for v in value)
    return value


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    worst = torch.zeros((), dtype=torch.float64, device=a.device)
    for x, y in zip(a.reshape(-1).split(CHUNK), b.reshape(-1).split(CHUNK)):
        d = (x.double() - y.double()).abs_()
        worst = torch.maximum(worst, torch.nan_to_num(d, nan=0.0, posinf=0.0).max())
    return float(worst)


def _mean_abs(t: torch.Tensor) -> float:
    total, count = 0.0, 0
    for x in t.reshape(-1).split(CHUNK):
        x = x.double()
        finite = torch.isfinite(x)
        total += float(torch.where(finite, x.abs(), torch.zeros_like(x)).sum())
        count += int(finite.sum())
    return total / count if count else 0.0


def passes(answer: Any, ref: torch.Tensor, atol: float, rtol: float) -> bool:
    """Does ``answer`` (a tensor of ref's shape, or a Python number) pass against ``ref`` at this bound?
    NaN or Inf in the reference cannot be met by a trivial answer; chunked like the comparison."""
    r = ref.reshape(-1)
    a = answer.reshape(-1) if isinstance(answer, torch.Tensor) else None
    for start in range(0, r.numel(), CHUNK):
        rc = r[start:start + CHUNK].double()
        ac = a[start:start + CHUNK].double() if a is not None else torch.full_like(rc, float(answer))
        if not bool(torch.isfinite(rc).all()):
            return False
        if not bool(((ac - rc).abs() <= atol + rtol * rc.abs()).all()):
            return False
    return True


def trivial_answer(ref: torch.Tensor, inputs: Sequence[Any], atol: float, rtol: float) -> str | None:
    """The first trivial answer that passes against ``ref`` (see the module docstring), or None."""
    if ref.numel() == 0:
        return None
    if passes(0.0, ref, atol, rtol):
        return "all zeros"
    mean = _mean_of(ref) if ref.numel() > 1 else None  # one value is its own mean: no shortcut
    if mean is not None and passes(mean, ref, atol, rtol):
        return f"the constant {mean:.4g}"
    for i, x in enumerate(inputs):
        if isinstance(x, torch.Tensor) and x.shape == ref.shape and x.is_floating_point() \
                and passes(x.to(ref.device), ref, atol, rtol):
            return f"input[{i}] returned unchanged"
    return None


def _mean_of(ref: torch.Tensor) -> float | None:
    total, count = 0.0, 0
    for x in ref.reshape(-1).split(CHUNK):
        total += float(x.double().sum())
        count += x.numel()
    mean = total / count if count else 0.0
    return mean if math.isfinite(mean) else None


def derive(ref: Any, ref64: Any | None, inputs: Sequence[Any], profile: str) -> list[LeafTolerance | None]:
    """Per output leaf of ``ref``: the derived bound, or None for a leaf compared exactly (integers,
    booleans) or as a scalar. ``ref64``: the same reference run in float64 (None when it could not
    run: the profile's atol then stands, and the trivial answers are still tried against it)."""
    refs = leaves(ref)
    doubles = leaves(ref64) if ref64 is not None else [None] * len(refs)
    if len(doubles) != len(refs):
        doubles = [None] * len(refs)
    out: list[LeafTolerance | None] = []
    n_inputs = sum(t.numel() for t in leaves(list(inputs)) if isinstance(t, torch.Tensor) and t.is_floating_point())
    for r, d in zip(refs, doubles):
        if not (isinstance(r, torch.Tensor) and r.is_floating_point()):
            out.append(None)
            continue
        atol, rtol = tolerance_for(profile, str(r.dtype).removeprefix("torch."))
        ok = isinstance(d, torch.Tensor) and d.shape == r.shape and d.is_floating_point()
        err = _max_abs_diff(r, d) if ok else None
        scale = _mean_abs(d if ok else r)
        if err is not None and 0 < r.numel() and n_inputs >= AGGREGATE_INPUTS * r.numel():
            least = max(AGGREGATE_RTOL, OUTPUT_STEPS * torch.finfo(r.dtype).eps)
            rtol = min(rtol, max(least, ERROR_FACTOR * err / scale if scale > 0 else rtol))
        if err is not None:
            atol = min(atol, max(ERROR_FACTOR * err, rtol * scale))
        out.append(LeafTolerance(atol, rtol, err, scale, trivial_answer(r, inputs, atol, rtol)))
    return out
