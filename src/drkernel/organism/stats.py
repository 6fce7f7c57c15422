"""The permutation test the organism's claims are decided by (pure functions, no I/O).

Notation: ``high`` = (a_1 .. a_n) and ``low`` = (b_1 .. b_m) are per-seed values of one metric in two
arms (each a run's mean over its last steps); the statistic is the difference of means

    D = mean(a) - mean(b).

Under the null hypothesis (the arm makes no difference to the metric) the n + m values are
exchangeable, so every way of splitting them into groups of n and m is equally likely. The one-sided
p-value in the registered direction (``high`` above ``low``) is the share of splits whose D is at
least the observed one:

    p = #{splits S : D(S) >= D_obs} / #{splits}          (exact: all C(n + m, n) splits)
    p = (1 + #{k : D(S_k) >= D_obs}) / (1 + K)           (Monte Carlo: K random splits)

The Monte-Carlo form counts the observed split once, so p is never 0 (a valid p-value for any K;
Phipson and Smyth 2010, "Permutation p-values should never be zero"). With n = m = 8 the exact test
has 12 870 splits and its smallest p is 1/12 870; with n = m = 2 it is 1/6, so two seeds per arm can
never reach 5 %.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Sequence

EXACT_LIMIT = 200_000
"""Splits up to which the test enumerates all of them (C(20, 10) = 184 756); above, Monte Carlo."""
TIE = 1e-12
"""Two statistics closer than this count as equal (sums of the same floats in another order)."""


@dataclass(frozen=True)
class PermutationResult:
    """One-sided permutation test of ``mean(high) > mean(low)``."""

    difference: float
    """mean(high) - mean(low)."""
    p_value: float
    """P(D >= observed) under exchangeability (the registered direction)."""
    p_reverse: float
    """P(D <= observed): the same test in the opposite direction."""
    splits: int
    """Splits counted (all of them when ``exact``)."""
    exact: bool


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _count(pooled: Sequence[float], n: int, observed: float, groups: Sequence[Sequence[int]]
           ) -> tuple[int, int, int]:
    """(splits, splits with D >= observed, splits with D <= observed) over ``groups`` (the indices
    of ``high`` in each split)."""
    total, m = sum(pooled), len(pooled) - n
    splits = above = below = 0
    for idx in groups:
        s = sum(pooled[i] for i in idx)
        d = s / n - (total - s) / m
        splits += 1
        above += d >= observed - TIE
        below += d <= observed + TIE
    return splits, above, below


def permutation_test(high: Sequence[float], low: Sequence[float], resamples: int = 20_000,
                     seed: int = 0) -> PermutationResult:
    """Two-sample permutation test of the difference of means, one-sided towards ``high``.

    Exact (every split) when there are at most `EXACT_LIMIT` splits, else ``resamples`` random splits
    drawn with ``seed`` (the test's own randomness, fixed so the report is reproducible from the
    values). NaN values are a caller error (a run without the metric): ValueError.
    """
    values = list(high) + list(low)
    n, m = len(high), len(low)
    if n == 0 or m == 0:
        raise ValueError(f"permutation test needs values in both arms (got {n} and {m})")
    if not all(math.isfinite(v) for v in values):
        raise ValueError("permutation test on non-finite values")
    observed = _mean(high) - _mean(low)
    if math.comb(n + m, n) <= EXACT_LIMIT:
        splits, above, below = _count(values, n, observed, itertools.combinations(range(n + m), n))
        return PermutationResult(observed, above / splits, below / splits, splits, True)
    rng = random.Random(seed)
    draws = (rng.sample(range(n + m), n) for _ in range(resamples))
    splits, above, below = _count(values, n, observed, draws)
    return PermutationResult(observed, (1 + above) / (1 + splits), (1 + below) / (1 + splits), splits, False)
