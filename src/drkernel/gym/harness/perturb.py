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

Judge and candidate run this code on the same draw with the same seed, so they agree. Pairs whose
two values are equal (a sparse or integer input) are passed over for ones that differ, where any do.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import torch

PAIR_SPACING = 8192
"""One swapped pair per this many elements (a density of 1/4096 changed values)."""
MAX_PAIRS = 256
"""At most this many pairs per tensor: enough that some output visibly changes, few enough that a
sampled fingerprint misses them."""
CANDIDATES = 4
"""Candidate pairs drawn per pair kept (those whose values are equal are passed over)."""


def pair_count(n: int) -> int:
    """Pairs swapped in a tensor of ``n`` elements (0 when it has fewer than two)."""
    return 0 if n < 2 else max(1, min(MAX_PAIRS, n // PAIR_SPACING))


def _rng(seed: int, index: int) -> random.Random:
    digest = hashlib.sha256(f"drkernel-perturb:{int(seed)}:{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _distinct_pairs(rng: random.Random, n: int, count: int) -> list[tuple[int, int]]:
    """Up to ``count`` pairs of positions in ``range(n)``, no position in two pairs."""
    used: set[int] = set()
    pairs = []
    for _ in range(count):
        p, q = rng.randrange(n), rng.randrange(n)
        if p != q and p not in used and q not in used:
            used.update((p, q))
            pairs.append((p, q))
    return pairs


def _unravel(flat: list[int], shape: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, ...]:
    """Row-major flat positions as one index tensor per dimension (``torch.unravel_index`` costs a
    lazy import of ~0.4 s on its first call)."""
    dims = []
    for size in reversed(shape):
        dims.append([f % size for f in flat])
        flat = [f // size for f in flat]
    return tuple(torch.tensor(d, device=device, dtype=torch.long) for d in reversed(dims))


def swap_some(x: torch.Tensor, seed: int, index: int) -> torch.Tensor:
    """``x`` with `pair_count` secret pairs of its elements swapped, in place (a view that repeats
    memory, such as an expanded tensor, is materialised first); the pairs follow from ``seed`` and
    the input's ``index``."""
    k = pair_count(x.numel())
    if k == 0:
        return x
    if any(stride == 0 and size > 1 for size, stride in zip(x.shape, x.stride())):
        x = x.clone()
    pairs = _distinct_pairs(_rng(seed, index), x.numel(), CANDIDATES * k)
    p, q = (_unravel([pair[side] for pair in pairs], tuple(x.shape), x.device) for side in (0, 1))
    differ = (x[p] != x[q]).tolist()
    chosen = ([i for i, d in enumerate(differ) if d] or list(range(len(pairs))))[:k]
    pick = torch.tensor(chosen, device=x.device)
    p, q = tuple(t[pick] for t in p), tuple(t[pick] for t in q)
    held = x[p].clone()
    x[p] = x[q]
    x[q] = held
    return x


def perturb(inputs: list[Any], seed: int) -> list[Any]:
    """Every tensor of ``inputs`` (a drawn input list) with a few pairs swapped (`swap_some`)."""
    return [swap_some(v, seed, i) if isinstance(v, torch.Tensor) else v for i, v in enumerate(inputs)]
