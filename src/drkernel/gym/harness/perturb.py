"""Sparse perturbations of drawn inputs: a few secret pairs of positions per tensor, swapped.

A solution that caches outputs by a fingerprint of a few sampled input values (a sum, a handful of
elements read with one ``.item()``) returns the cached output for any input that agrees at the
sampled positions. Every other run of the gym changes every value, so such a cache never serves a
wrong answer there. A perturbation changes only ``2 * pairs`` of a tensor's ``n`` values, at
positions drawn from the seed (`drkernel.gym.seeds.perturbed`), so a fingerprint of ``s`` sampled
positions misses it with probability about

    (1 - 2 * pairs / n) ** s        (pairs = clamp(n // PAIR_SPACING, 1, MAX_PAIRS))

(n = 2048: 0.992 at s = 8; n = 8M: 0.997 at s = 48), while the outputs that read a swapped value
change. Swapping values of the same tensor keeps every value in the trial's distribution and in the
range an index input allows (a permutation stays a permutation), changes no sum or histogram (so
a fingerprint by sum or maximum is blind to it too), and needs no second draw (no extra memory).

A swap keeps the structure ``get_inputs`` gave the input, so a kernel that relies on what the problem
promises is not refused for it: both positions lie in one row of the last dimension (a row's sum,
maximum and values stay: normalised rows stay normalised), both values are nonzero (the zero pattern
stays: a triangular or masked input stays so), and in a symmetric matrix each swap is mirrored across
the diagonal (off it), so the matrix stays symmetric. Pairs whose values are equal or zero are passed
over; where no candidate qualifies, the tensor is left as it is. Judge and candidate run this code on
the same draw with the same seed, so they agree.
Steps 1 and 2 are the ``sparse_perturb`` integrity run's; from `drkernel.gym.seeds.TIMED_FIRST_STEP`
on, a step names a timed call, which gets a fresh draw instead (`drkernel.gym.harness.inputs.TimedDraws`:
a few swapped values would let a GEMM update the last call's answer by a low-rank correction).

Some outputs cannot see a swap within a row: a mean over the last dimension, a scalar loss over all
values. For those problems the judge sets the seeds' perturbation mode (`drkernel.gym.seeds.across_rows`,
decided once per problem at prepare: does a within-row step move the reference's output past its
tolerance?). In that mode a swap's second position is drawn anywhere in the tensor, and the two
swapped floating values are then scaled by `AMPLIFY` (a swap alone moves a mean over n values only
by a random O(1/n): no tolerance sees it), at `ACROSS_SPACING`. The zero pattern, each value's sign
and the mirroring of a symmetric matrix still hold; a row's sum does not (normalised rows are not kept in
that mode). The miss probability above becomes ``(1 - 2 / ACROSS_SPACING) ** s`` per step.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import torch

from drkernel.gym.seeds import TIMED_FIRST_STEP, across_rows, perturbation_of

PAIR_SPACING = 8192
"""One swapped pair per this many elements (a density of 1/4096 changed values)."""
MAX_PAIRS = 256
"""At most this many pairs per tensor: enough that some output visibly changes, few enough that a
sampled fingerprint misses them."""
ACROSS_SPACING = 1024
"""One swapped pair per this many elements in the across-rows mode (sparse_perturb's steps)."""
AMPLIFY = {torch.float16: 8.0, torch.bfloat16: 8.0}
"""The factor the swapped floating values are scaled by in the across-rows mode, by dtype (default
`AMPLIFY_DEFAULT`; half types less, so that their products stay finite)."""
AMPLIFY_DEFAULT = 32.0
MAX_ACROSS_PAIRS = 1 << 16
"""At most this many pairs per tensor in the across-rows mode."""
CANDIDATES = 8
"""Candidate pairs drawn per pair kept (those whose values are equal or zero are passed over)."""
MIN_CANDIDATES = 64
"""Candidate pairs drawn per tensor at least: a small sparse tensor (half its values zero) still finds
a pair of unequal nonzero values."""


def pair_count(n: int, step: int = 1, across: bool = False) -> int:
    """Pairs swapped in a tensor of ``n`` elements at perturbation ``step`` (0 when it has fewer than
    two elements, or at a timed call's step, `drkernel.gym.seeds.TIMED_FIRST_STEP` on, which draws
    afresh instead; denser in the across-rows mode, ``across``)."""
    if n < 2 or step >= TIMED_FIRST_STEP:
        return 0
    if across:
        return max(1, min(MAX_ACROSS_PAIRS, n // ACROSS_SPACING))
    return max(1, min(MAX_PAIRS, n // PAIR_SPACING))


def _pairs_of(n: int, seed: int) -> int:
    return pair_count(n, perturbation_of(seed), across_rows(seed))


def _rng(seed: int, index: int) -> torch.Generator:
    digest = hashlib.sha256(f"drkernel-perturb:{int(seed)}:{index}".encode()).digest()
    g = torch.Generator()  # on the host: judge and candidate draw the same positions whatever their device
    g.manual_seed(int.from_bytes(digest[:8], "big") >> 1)
    return g


def symmetric(x: torch.Tensor) -> bool:
    """Is ``x`` a (batch of) square matrices equal to their transposes, exactly?"""
    return x.dim() >= 2 and x.shape[-1] == x.shape[-2] > 1 and bool(torch.equal(x, x.mT))


def _candidates(shape: tuple[int, ...], seed: int, index: int, sym: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The candidate pairs (flat positions ``p``, ``q``, on the host) of input ``index`` at ``seed``'s
    perturbation step: `CANDIDATES` drawn per pair kept (at least `MIN_CANDIDATES`), both positions
    in one row of the last dimension (anywhere in the tensor in the across-rows mode), two distinct
    positions, off the diagonal of a symmetric matrix (``sym``). Drawn as tensors: the across-rows mode
    draws half a million candidates, which a Python loop took seconds over on each side of every
    perturbed call. `_chosen` keeps pairs that share no position."""
    n = math.prod(shape)
    row = n if across_rows(seed) else (shape[-1] if shape else 1)
    g, count = _rng(seed, index), max(MIN_CANDIDATES, CANDIDATES * _pairs_of(n, seed))
    p = torch.randint(n, (count,), generator=g)
    q = p - p % row + torch.randint(row, (count,), generator=g)
    ordered = _group(p, q, shape, sym).sort(dim=1).values
    distinct = (ordered[:, 1:] != ordered[:, :-1]).all(dim=1)  # p != q, no diagonal mirror
    return p[distinct], q[distinct]


def _group(p: torch.Tensor, q: torch.Tensor, shape: tuple[int, ...], sym: bool) -> torch.Tensor:
    """Each pair's positions, its mirrors' too in a symmetric matrix: (pairs, 2 or 4)."""
    return torch.stack([p, q, *((_mirror(p, shape[-1]), _mirror(q, shape[-1])) if sym else ())], dim=1)


def _first_use(group: torch.Tensor) -> torch.Tensor:
    """Per row of ``group``: does none of its positions appear in an earlier row?"""
    if not group.shape[0]:
        return torch.zeros(0, dtype=torch.bool)
    _, where = torch.unique(group.reshape(-1), return_inverse=True)
    owner = torch.arange(group.shape[0]).repeat_interleave(group.shape[1])
    first = torch.full((int(where.max()) + 1,), group.shape[0]).scatter_reduce(0, where, owner, "amin")
    return (first[where] == owner).reshape(group.shape).all(dim=1)


def _mirror(flat: torch.Tensor, m: int) -> torch.Tensor:
    """The positions across the diagonal of a batch of ``m`` x ``m`` matrices (a diagonal position
    mirrors onto itself, which `_candidates` then refuses)."""
    base, within = flat - flat % (m * m), flat % (m * m)
    return base + (within % m) * m + within // m


def _with_mirrors(p: torch.Tensor, q: torch.Tensor, shape: tuple[int, ...], sym: bool) -> tuple[torch.Tensor, torch.Tensor]:
    if not sym:
        return p, q
    return torch.cat([p, _mirror(p, shape[-1])]), torch.cat([q, _mirror(q, shape[-1])])


def _chosen(p: torch.Tensor, q: torch.Tensor, differ: torch.Tensor, k: int, shape: tuple[int, ...],
            sym: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` candidate pairs whose two values differ most (both nonzero; maybe none), earlier
    candidates first among equals, none sharing a position (nor a mirror) with a pair ranked before it:
    the larger the difference, the more an output that reads a swapped value moves."""
    order = torch.sort(-differ, stable=True).indices
    order = order[differ[order] > 0]
    order = order[_first_use(_group(p[order], q[order], shape, sym))][:k]
    return p[order], q[order]


def _unravel(flat: torch.Tensor, shape: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, ...]:
    """Row-major flat positions as one index tensor per dimension (``torch.unravel_index`` costs a
    lazy import of ~0.4 s on its first call)."""
    dims = []
    for size in reversed(shape):
        dims.append(flat % size)
        flat = flat // size
    return tuple(d.to(device) for d in reversed(dims))


_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(x: torch.Tensor) -> torch.Tensor:
    """``x`` viewed as integers of its element size (bool and complex as they are): indexing works
    for every dtype (``index_put`` has no kernel for some, e.g. uint16 on CPU), and a swap moves bits."""
    size = x.element_size()
    return x if x.dtype == torch.bool or x.is_complex() or size not in _INT_OF_SIZE else x.view(_INT_OF_SIZE[size])


def _differ(x: torch.Tensor, p: tuple[torch.Tensor, ...], q: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Per pair: how much a swap changes the content (|difference| of the two values; 1 for unequal
    values without a magnitude), 0 where they are equal or either is zero (zeros are kept)."""
    xp, xq = x[p], x[q]  # each gathered once (half a million positions in the across-rows mode)
    qualifies = (_bits(xp) != _bits(xq)) & (xp != 0) & (xq != 0)
    if x.dtype == torch.bool or not (x.is_floating_point() or x.is_complex() or x.dtype.is_signed):
        return qualifies.double().cpu()
    wide = torch.complex128 if x.is_complex() else torch.float64
    gap = (xp.to(wide) - xq.to(wide)).abs()
    return torch.where(qualifies, gap.nan_to_num(nan=1.0, posinf=1.0).clamp_min(1e-300), 0.0).cpu()


def _swap(x: torch.Tensor, p: tuple[torch.Tensor, ...], q: tuple[torch.Tensor, ...]) -> None:
    b = _bits(x)  # a view: the swap lands in x
    held = b[p].clone()
    b[p] = b[q]
    b[q] = held


def _amplify(x: torch.Tensor, p: tuple[torch.Tensor, ...], q: tuple[torch.Tensor, ...]) -> None:
    """Scale the swapped values of a floating ``x`` by `AMPLIFY` (the across-rows mode), in place."""
    if x.is_floating_point():
        factor = AMPLIFY.get(x.dtype, AMPLIFY_DEFAULT)
        x[p] = x[p] * factor
        x[q] = x[q] * factor


def swap_some(x: torch.Tensor, seed: int, index: int) -> torch.Tensor:
    """``x`` with `pair_count` secret pairs of its elements swapped, in place (a view that repeats
    memory, such as an expanded tensor, is materialised first); the pairs follow from ``seed`` (its
    perturbation step included) and the input's ``index``."""
    k = _pairs_of(x.numel(), seed)
    if k == 0:
        return x
    if any(stride == 0 and size > 1 for size, stride in zip(x.shape, x.stride())):
        x = x.clone()
    sym, shape = symmetric(x), tuple(x.shape)
    p, q = _candidates(shape, seed, index, sym)
    if not p.numel():
        return x
    differ = _differ(x, _unravel(p, shape, x.device), _unravel(q, shape, x.device))
    p, q = _with_mirrors(*_chosen(p, q, differ, k, shape, sym), shape, sym)
    if p.numel():
        sides = _unravel(p, shape, x.device), _unravel(q, shape, x.device)
        _swap(x, *sides)
        if across_rows(seed):
            _amplify(x, *sides)
    return x


def perturb(inputs: list[Any], seed: int) -> list[Any]:
    """Every tensor of ``inputs`` (a drawn input list) with a few pairs swapped (`swap_some`)."""
    return [swap_some(v, seed, i) if isinstance(v, torch.Tensor) else v for i, v in enumerate(inputs)]
