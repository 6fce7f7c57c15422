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
Steps 1 and 2 are the ``sparse_perturb`` integrity run's; from `drkernel.gym.seeds.TIMED_FIRST_STEP`
on, one pair per tensor varies each timed call on the GPU (`TimedVariation`).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import torch

from drkernel.gym.seeds import TIMED_FIRST_STEP, perturbation_of, perturbed, timed_step

PAIR_SPACING = 8192
"""One swapped pair per this many elements (a density of 1/4096 changed values)."""
MAX_PAIRS = 256
"""At most this many pairs per tensor: enough that some output visibly changes, few enough that a
sampled fingerprint misses them."""
CANDIDATES = 4
"""Candidate pairs drawn per pair kept (those whose values are equal are passed over)."""


def pair_count(n: int, step: int = 1) -> int:
    """Pairs swapped in a tensor of ``n`` elements at perturbation ``step`` (0 when it has fewer than
    two elements; one at a timed call's step, `drkernel.gym.seeds.TIMED_FIRST_STEP` on)."""
    if n < 2:
        return 0
    return 1 if step >= TIMED_FIRST_STEP else max(1, min(MAX_PAIRS, n // PAIR_SPACING))


def _rng(seed: int, index: int) -> random.Random:
    digest = hashlib.sha256(f"drkernel-perturb:{int(seed)}:{index}".encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


def _candidates(n: int, seed: int, index: int) -> list[tuple[int, int]]:
    """The candidate pairs of input ``index`` (``n`` elements) at ``seed``'s perturbation step: up to
    `CANDIDATES` per pair kept, no position in two pairs."""
    rng, used, pairs = _rng(seed, index), set(), []
    for _ in range(CANDIDATES * pair_count(n, perturbation_of(seed))):
        p, q = rng.randrange(n), rng.randrange(n)
        if p != q and p not in used and q not in used:
            used.update((p, q))
            pairs.append((p, q))
    return pairs


def _chosen(pairs: list[tuple[int, int]], differ: list[bool], k: int) -> list[tuple[int, int]]:
    """The first ``k`` candidate pairs whose two values differ (the first ``k`` if none do)."""
    return ([pair for pair, d in zip(pairs, differ) if d] or pairs)[:k]


def _unravel(flat: list[int], shape: tuple[int, ...], device: torch.device) -> tuple[torch.Tensor, ...]:
    """Row-major flat positions as one index tensor per dimension (``torch.unravel_index`` costs a
    lazy import of ~0.4 s on its first call)."""
    dims = []
    for size in reversed(shape):
        dims.append([f % size for f in flat])
        flat = [f // size for f in flat]
    return tuple(torch.tensor(d, device=device, dtype=torch.long) for d in reversed(dims))


def _sides(pairs: list[tuple[int, int]], x: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], ...]:
    return tuple(_unravel([pair[side] for pair in pairs], tuple(x.shape), x.device) for side in (0, 1))


_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(x: torch.Tensor) -> torch.Tensor:
    """``x`` viewed as integers of its element size (bool and complex as they are): indexing works
    for every dtype (``index_put`` has no kernel for some, e.g. uint16 on CPU), and a swap moves bits."""
    size = x.element_size()
    return x if x.dtype == torch.bool or x.is_complex() or size not in _INT_OF_SIZE else x.view(_INT_OF_SIZE[size])


def _differ(x: torch.Tensor, p: tuple[torch.Tensor, ...], q: tuple[torch.Tensor, ...]) -> list[bool]:
    b = _bits(x)
    return (b[p] != b[q]).tolist()


def _swap(x: torch.Tensor, p: tuple[torch.Tensor, ...], q: tuple[torch.Tensor, ...]) -> None:
    b = _bits(x)  # a view: the swap lands in x
    held = b[p].clone()
    b[p] = b[q]
    b[q] = held


def swap_some(x: torch.Tensor, seed: int, index: int) -> torch.Tensor:
    """``x`` with `pair_count` secret pairs of its elements swapped, in place (a view that repeats
    memory, such as an expanded tensor, is materialised first); the pairs follow from ``seed`` (its
    perturbation step included) and the input's ``index``."""
    k = pair_count(x.numel(), perturbation_of(seed))
    if k == 0:
        return x
    if any(stride == 0 and size > 1 for size, stride in zip(x.shape, x.stride())):
        x = x.clone()
    pairs = _candidates(x.numel(), seed, index)
    p, q = _sides(pairs, x)
    _swap(x, *_sides(_chosen(pairs, _differ(x, p, q), k), x))
    return x


def perturb(inputs: list[Any], seed: int) -> list[Any]:
    """Every tensor of ``inputs`` (a drawn input list) with a few pairs swapped (`swap_some`)."""
    return [swap_some(v, seed, i) if isinstance(v, torch.Tensor) else v for i, v in enumerate(inputs)]


class TimedVariation:
    """One swapped pair per tensor in each timed call's inputs (`drkernel.gym.harness.timing`): no two
    timed calls see the same content, so a cache keyed by all of it never hits while timed, and the
    outputs the judge samples are compared against the reference on that call's inputs
    (`drkernel.gym.seeds.timed_step`). Equal to `perturb` at the call's step; the pairs are chosen
    before timing (one host read per tensor), so a timed call costs a few index kernels on the
    stream, issued before its start event, and no host wait."""

    def __init__(self, inputs: list[Any], seed: int, calls: int) -> None:
        self.calls = calls
        self.index: list[torch.Tensor | None] = []  # per input: (calls, 2, ndim) positions, or None
        for j, x in enumerate(inputs):
            n = x.numel() if isinstance(x, torch.Tensor) else 0
            if n < 2 or calls <= 0:
                self.index.append(None)
                continue
            per_call = [_candidates(n, perturbed(seed, timed_step(i)), j) for i in range(calls)]
            flat = [pair for pairs in per_call for pair in pairs]
            p, q = _sides(flat, x)
            differ, chosen, at = _differ(x, p, q), [], 0
            for pairs in per_call:
                chosen += _chosen(pairs, differ[at:at + len(pairs)], 1) or [(0, 0)]  # (0, 0): no swap
                at += len(pairs)
            p, q = _sides(chosen, x)
            self.index.append(torch.stack([torch.stack(p, 1), torch.stack(q, 1)], 1))  # (calls, 2, ndim)

    def __call__(self, args: list[Any], call: int) -> None:
        """Swap call ``call``'s pairs in ``args`` (that call's fresh clones of the inputs), in place."""
        for x, index in zip(args, self.index):
            if index is not None and call < self.calls:
                row = index[call]  # (2, ndim), a view on the device
                _swap(x, tuple(row[0, d:d + 1] for d in range(x.dim())), tuple(row[1, d:d + 1] for d in range(x.dim())))
