"""A speedup with its uncertainty, from the timed samples (torch-free, pure).

Notation: ``r_1 <= ... <= r_n`` the reference's sorted per-call times, ``s_1 <= ... <= s_m`` the
solution's; ``S = median(r) / median(s)`` the speedup.

Distribution-free bounds on a median (order statistics; e.g. Hollander & Wolfe, *Nonparametric
Statistical Methods*, 3.6): the number of samples below the true median is Binomial(n, 1/2), so

    P(x_(k) <= median <= x_(n+1-k)) = 1 - 2 * P(Binomial(n, 1/2) < k)

and ``k`` is the largest rank that keeps this at least the asked level. Nothing is assumed about
the times' distribution (timings are skewed and heavy-tailed), only that the calls are exchangeable.

The speedup's interval takes each median's bounds at level ``1 - (1 - level) / 2`` (Bonferroni), so
both hold together with probability at least ``level``, and divides them:

    S in [r_(k) / s_(m+1-j), r_(n+1-k) / s_(j)]

Fast@p counts a result as fast on the point estimate ``S > p``; `fast_p_counts` also reports how many
of those verdicts the interval leaves open (``low <= p <= high``), the ones a re-run could flip.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

LEVEL = 0.95
"""The joint coverage of a speedup's interval."""


def _binom_half_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), summed in log space so large ``n`` does not overflow."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    log_half_n = -n * math.log(2.0)
    terms = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + log_half_n for i in range(k + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(t - top) for t in terms))


def median_rank(n: int, level: float) -> int | None:
    """The largest ``k`` (1-based) with ``P(x_(k) <= median <= x_(n+1-k)) >= level``; None when even
    the sample's extremes cannot hold the median at that level (too few samples)."""
    if n < 1 or not 0.0 < level < 1.0:
        return None
    alpha = 1.0 - level
    best = None
    for k in range(1, (n + 1) // 2 + 1):
        if 2.0 * _binom_half_cdf(k - 1, n) <= alpha:
            best = k
        else:
            break
    return best


def median_bounds(samples: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """Order-statistic bounds ``(x_(k), x_(n+1-k))`` of the samples' median at ``level``."""
    xs = sorted(float(x) for x in samples)
    k = median_rank(len(xs), level)
    if k is None:
        return None
    return xs[k - 1], xs[len(xs) - k]


@dataclass(frozen=True)
class SpeedupInterval:
    """A speedup's point estimate (the ratio of medians) and its bounds at ``level``."""

    speedup: float
    low: float
    high: float
    level: float

    def contains(self, p: float) -> bool:
        return self.low <= p <= self.high


def speedup_interval(reference_ms: Sequence[float], solution_ms: Sequence[float],
                     level: float = LEVEL) -> SpeedupInterval | None:
    """The ratio of medians with bounds holding jointly at ``level`` (module docstring); None when
    either side has too few samples for bounds or a non-positive time."""
    each = 1.0 - (1.0 - level) / 2.0
    ref, sol = median_bounds(reference_ms, each), median_bounds(solution_ms, each)
    if ref is None or sol is None or min(ref[0], sol[0]) <= 0.0:
        return None
    point = _median(reference_ms) / _median(solution_ms)
    return SpeedupInterval(point, ref[0] / sol[1], ref[1] / sol[0], level)


RUN_TO_RUN = 0.02
"""Relative widening of a speedup's interval on each side for what one run's samples cannot see: the
clocks, memory placement and the reference timed at another moment differ between runs. Measured on
an H100 (2026-11-27): the built-in suite's bench run replayed in a second process moved 4 of 33
speedups by 1.2-3.8 %, outside their within-run intervals; with this widening all overlap."""


def across_runs(interval: SpeedupInterval | None, rel: float = RUN_TO_RUN) -> SpeedupInterval | None:
    """``interval`` widened to hold for a re-run: ``[low (1 - rel), high (1 + rel)]`` (the point kept)."""
    if interval is None:
        return None
    return SpeedupInterval(interval.speedup, interval.low * (1.0 - rel), interval.high * (1.0 + rel), interval.level)


def _median(xs: Sequence[float]) -> float:
    ys = sorted(float(x) for x in xs)
    mid = len(ys) // 2
    return ys[mid] if len(ys) % 2 else (ys[mid - 1] + ys[mid]) / 2.0


@dataclass(frozen=True)
class FastAtP:
    """Fast@p over results: ``fast`` of ``total`` beat ``p`` on the point estimate; ``uncertain`` of
    all ``total`` have ``p`` inside their interval (fast or not, a re-run could flip them)."""

    p: float
    fast: int
    uncertain: int
    total: int


def fast_p_counts(points: Iterable[tuple[float | None, tuple[float, float] | None]], p: float) -> FastAtP:
    """``points``: one (speedup, (low, high) or None) per result that counts (a missing speedup is
    not fast). A result without an interval counts as certain."""
    fast = uncertain = total = 0
    for speedup, ci in points:
        total += 1
        fast += speedup is not None and speedup > p
        uncertain += ci is not None and ci[0] <= p <= ci[1]
    return FastAtP(p, fast, uncertain, total)


def rewarded_speedup(speedup: float | None, ci: tuple[float, float] | None, lower_bound: bool) -> float | None:
    """The speedup a reward pays: the point estimate, or with ``lower_bound`` the interval's low end
    (so noise never pays; a speedup without an interval is paid as measured)."""
    if lower_bound and speedup is not None and ci is not None:
        return min(speedup, ci[0])
    return speedup
