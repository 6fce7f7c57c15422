"""Compare a solution's outputs with the reference's (run by the judge).

An output is a tensor, a scalar, or a tuple/list of them. Per tensor leaf: same shape, same dtype,
NaN and Inf exactly where the reference has them, and ``|out - ref| <= atol + rtol * |ref|``
elementwise (``torch.allclose`` semantics); integer and bool leaves exactly, but for rounding ties
(`rounding_ties`: a few values one step off). Errors are computed in chunks so a multi-GB output
needs only a chunk of scratch memory.

TF32 slack: where the profile allows TF32 (``kernelgym``, the paper's environment), a GEMM or
convolution computed in TF32 is a correct solution. On a trial drawn at a wider scale
(`drkernel.gym.seeds.Distribution.WIDE`) its error grows with the products' magnitude while atol
stays put; on a shifted trial (``SHIFTED``, +100) TF32's 10-bit mantissa rounds the inputs to steps
of 1/16 before the products cancel (measured on an H100, 2026-11-24: 7 of 41 built-in golds failed
there); and on plain inputs a long reduction (K = 4096) leaves TF32 outputs near zero outside atol
(vLLM's persistent fp32 GEMM, 0.7 % of outputs, H100, 2026-11-27). So on every trial the judge also
runs the reference with TF32 on and passes ``slack``: per output leaf,
``TF32_SLACK x max |ref_tf32 - ref|`` is added to the bound. A reference without matmuls has no
slack (its TF32 run is identical), so a dropped term still fails there.

Derived bounds: the judge passes ``bounds``, per output leaf the absolute term derived from the
reference itself (`drkernel.gym.judge.tolerance`): the profile's atol, tightened where the
reference's outputs are small next to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from drkernel.gym.config import tolerance_for

CHUNK = 1 << 25
TF32_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "einsum", "tensordot",
                      "convolution", "_convolution", "cudnn_convolution", "conv1d", "conv2d", "conv3d",
                      "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "cudnn_convolution_transpose",
                      "addmv", "mv", "dot", "vdot", "_scaled_dot_product_flash_attention",
                      "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention"})
"""Aten ops (base names) whose fp32 results change with TF32 on: a reference without any has no slack,
and the judge does not run it a second time."""
TF32_SLACK = 4.0
"""How many times the reference's own TF32 error a solution may show."""


@dataclass
class Comparison:
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str = ""
    atol: float | None = None
    rtol: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "max_abs_err": self.max_abs_err, "max_rel_err": self.max_rel_err,
                "message": self.message, "atol": self.atol, "rtol": self.rtol}


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _leaves(value: Any, path: str = "output") -> list[tuple[str, Any]]:
    if isinstance(value, (tuple, list)):
        out = []
        for i, v in enumerate(value):
            out += _leaves(v, f"{path}[{i}]")
        return out
    return [(path, value)]


def tf32_slack(ref: Any, ref_tf32: Any) -> list[float]:
    """Per output leaf of ``ref``: ``TF32_SLACK x`` the largest deviation of the TF32 reference."""
    out = []
    for (_, r), (_, t) in zip(_leaves(ref), _leaves(ref_tf32)):
        ok = isinstance(r, torch.Tensor) and isinstance(t, torch.Tensor) and r.is_floating_point() \
            and r.shape == t.shape and r.numel() > 0
        if not ok:
            out.append(0.0)
            continue
        worst = torch.zeros((), device=r.device)  # kept on the device: one synchronisation per leaf
        for a, b in zip(t.reshape(-1).split(CHUNK), r.reshape(-1).split(CHUNK)):  # no full-size temporaries
            diff = (a.float() - b.float()).abs_()
            worst = torch.maximum(worst, torch.nan_to_num(diff, nan=0.0, posinf=0.0).max())
        out.append(TF32_SLACK * float(worst))
    return out


def compare_outputs(out: Any, ref: Any, profile: str, slack: list[float] | None = None,
                    bounds: list[Any] | None = None) -> Comparison:
    """Compare a whole output tree; the first failing leaf decides the message. ``slack``: an absolute
    allowance added per leaf (see the module docstring, TF32 slack); ``bounds``: per leaf, a
    `drkernel.gym.judge.tolerance.LeafTolerance` (or None: the profile's tolerance)."""
    if isinstance(ref, (tuple, list)) != isinstance(out, (tuple, list)):
        return Comparison(False, message=f"output is a {type(out).__name__}, expected a {type(ref).__name__}")
    ref_leaves, out_leaves = _leaves(ref), _leaves(out)
    if len(ref_leaves) != len(out_leaves):
        return Comparison(False, message=f"output has {len(out_leaves)} values, expected {len(ref_leaves)}")
    worst_abs = worst_rel = 0.0
    atol = rtol = None
    for i, ((path, r), (_, o)) in enumerate(zip(ref_leaves, out_leaves)):
        bound = bounds[i] if bounds and i < len(bounds) else None
        c = compare_leaf(o, r, profile, path, slack[i] if slack and i < len(slack) else 0.0, bound)
        if atol is None:
            atol, rtol = c.atol, c.rtol
        if not c.passed:
            return c
        worst_abs = max(worst_abs, c.max_abs_err or 0.0)
        worst_rel = max(worst_rel, c.max_rel_err or 0.0)
    return Comparison(True, worst_abs, worst_rel, "", atol, rtol)


def compare_leaf(out: Any, ref: Any, profile: str, path: str = "output", slack: float = 0.0,
                 bound: Any = None) -> Comparison:
    if not isinstance(ref, torch.Tensor):
        return _compare_scalar(out, ref, profile, path)
    atol, rtol = (bound.atol, bound.rtol) if bound is not None else tolerance_for(profile, _dtype_name(ref))
    if not isinstance(out, torch.Tensor):
        return Comparison(False, message=f"{path} is a {type(out).__name__}, expected a tensor", atol=atol, rtol=rtol)
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(False, message=f"{path} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}",
                          atol=atol, rtol=rtol)
    if out.dtype != ref.dtype:
        return Comparison(False, message=f"{path} has dtype {_dtype_name(out)}, expected {_dtype_name(ref)}",
                          atol=atol, rtol=rtol)
    return _compare_values(out.to(ref.device), ref, atol, rtol, path, slack)


def _compare_values(out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, path: str,
                    slack: float = 0.0) -> Comparison:
    o, r = out.reshape(-1), ref.reshape(-1)
    max_abs = max_rel = 0.0
    bad = 0
    first_bad = None
    for start in range(0, o.numel(), CHUNK):
        oc = o[start:start + CHUNK]
        rc = r[start:start + CHUNK]
        if not (oc.is_floating_point() or oc.is_complex()):
            diff = (oc.long() - rc.long()).abs().double()
            ok = diff == 0
            max_abs = max(max_abs, float(diff.max()) if diff.numel() else 0.0)
        else:
            oc, rc = oc.float(), rc.float()
            plain = _plain_chunk(oc, rc, atol + slack, rtol)
            if plain is not None:
                max_abs, max_rel = max(max_abs, plain[0]), max(max_rel, plain[1])
                continue
            o_nan, r_nan = torch.isnan(oc), torch.isnan(rc)
            if not torch.equal(o_nan, r_nan):
                where = int(torch.nonzero(o_nan != r_nan)[0]) + start
                what = "NaN" if bool(o_nan.any()) else "a number"
                return Comparison(False, message=f"{path} has {what} at flat index {where} where the reference "
                                  f"has {'a number' if what == 'NaN' else 'NaN'}", atol=atol, rtol=rtol)
            o_inf, r_inf = torch.isinf(oc), torch.isinf(rc)
            if not torch.equal(o_inf, r_inf) or not torch.equal(oc[r_inf], rc[r_inf]):
                return Comparison(False, message=f"{path} has Inf where the reference does not (or the reverse)",
                                  atol=atol, rtol=rtol)
            finite = ~(r_nan | r_inf)
            diff = torch.where(finite, (oc - rc).abs(), torch.zeros_like(oc))
            ok = diff <= atol + slack + rtol * rc.abs()
            ok |= ~finite
            if diff.numel():
                max_abs = max(max_abs, float(diff.max()))
                rel = diff / rc.abs().clamp_min(1e-12)
                max_rel = max(max_rel, float(torch.where(finite, rel, torch.zeros_like(rel)).max()))
        n_bad = int((~ok).sum())
        if n_bad and first_bad is None:
            first_bad = int(torch.nonzero(~ok)[0]) + start
        bad += n_bad
    if bad and not (o.is_floating_point() or o.is_complex()) and rounding_ties(bad, max_abs, o.numel()):
        return Comparison(True, max_abs, max_rel, atol=atol, rtol=rtol)
    if bad:
        allowance = f" (+ TF32 slack {slack:.3g})" if slack else ""
        return Comparison(False, max_abs, max_rel, atol=atol, rtol=rtol, message=(
            f"{path}: {bad} of {o.numel()} values outside atol={atol:g} rtol={rtol:g}{allowance} "
            f"(max abs err {max_abs:.4g}, max rel err {max_rel:.4g}; first at flat index {first_bad}: "
            f"got {float(o[first_bad]):.6g}, expected {float(r[first_bad]):.6g})"))
    return Comparison(True, max_abs, max_rel, atol=atol, rtol=rtol)


INT_ROUNDING_FRACTION = 1e-4
"""Of an integer (or bool) output's values, the share that may differ from the reference's by exactly
one (`rounding_ties`)."""


def rounding_ties(bad: int, max_abs: float, numel: int) -> bool:
    """Whether an integer output's differences are float rounding at a step of the integer grid: every
    one exactly 1, and at most `INT_ROUNDING_FRACTION` of the values (none below 10,000 values). A
    quantiser computes ``x / scale`` (or ``x * (1 / scale)``) and rounds: where that lands within an ulp
    of a half step, a kernel's division (Triton's fp32 division is not IEEE round-to-nearest by
    default) and the reference's round to neighbouring integers. Measured on an H100 (SageAttention's
    int8 per-block quantiser, honest round 12, 2026-11-28): 2 of 131,072 values off by one, 1.5e-5 of
    them, an ulp's share of an int8 step. An off-by-one share this small saves no work worth having; a
    dropped element of a count or an index one off in many rows is still refused."""
    return max_abs <= 1.0 and bad <= int(numel * INT_ROUNDING_FRACTION)


def _plain_chunk(oc: torch.Tensor, rc: torch.Tensor, tol: float, rtol: float) -> tuple[float, float] | None:
    """The common case in a few passes: every difference finite (so neither side has a NaN or an Inf:
    either one makes it NaN or Inf) and within ``tol + rtol * |ref|``. Returns (max abs err, max rel err)
    as the careful path would; None sends the chunk to the careful path, which names what is wrong.
    At full size the careful path's ~25 passes and 5 host synchronisations per chunk made the judge's
    comparison the larger part of an export's round trip."""
    if not oc.numel():
        return 0.0, 0.0
    diff = torch.sub(oc, rc).abs_()
    ref_abs = rc.abs()
    ok = torch.isfinite(diff)
    ok &= diff <= ref_abs * rtol + tol
    if not bool(ok.all()):
        return None
    return float(diff.max()), float(diff.div_(ref_abs.clamp_min_(1e-12)).max())


def _compare_scalar(out: Any, ref: Any, profile: str, path: str) -> Comparison:
    atol, rtol = tolerance_for(profile, "float32")
    if isinstance(out, torch.Tensor) and out.numel() == 1:
        out = out.item()
    if isinstance(ref, (int, float)) and isinstance(out, (int, float)) and not isinstance(out, bool):
        if math.isnan(ref) or math.isnan(out):
            ok = math.isnan(ref) and math.isnan(out)
        else:
            ok = abs(out - ref) <= atol + rtol * abs(ref)
        err = abs(out - ref) if not (math.isnan(ref) or math.isnan(out)) else None
        return Comparison(ok, err, None, "" if ok else f"{path} is {out!r}, expected {ref!r}", atol, rtol)
    ok = out == ref and type(out) is type(ref)
    return Comparison(ok, None, None, "" if ok else f"{path} is {out!r}, expected {ref!r}", atol, rtol)


def inputs_changed(post: list[Any], ref_post: list[Any]) -> list[str]:
    """Indices of inputs whose post-run values differ from the reference's post-run values."""
    changed = []
    for i, (p, r) in enumerate(zip(post, ref_post)):
        if isinstance(r, torch.Tensor):
            if not isinstance(p, torch.Tensor) or p.shape != r.shape or p.dtype != r.dtype:
                changed.append(f"input[{i}]")
            elif not torch.equal(p, r) and not _equal_nan_aware(p.to(r.device), r):
                changed.append(f"input[{i}]")
    return changed


def _equal_nan_aware(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise-equal values, NaN equal to NaN; chunked (only reached when ``torch.equal`` said no)."""
    if not a.is_floating_point():
        return False
    fa, fb = a.reshape(-1), b.reshape(-1)
    for start in range(0, fa.numel(), CHUNK):
        x, y = fa[start:start + CHUNK], fb[start:start + CHUNK]
        if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
            return False
    return True
