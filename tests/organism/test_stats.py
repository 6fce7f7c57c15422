"""The permutation test: hand-worked cases, a brute-force loop, the Monte-Carlo branch, and the
registered claims' verdicts."""

import dataclasses
import random

import pytest

from drkernel.organism import stats
from drkernel.organism.claims import REGISTERED, Claim, Verdict, decide
from drkernel.organism.stats import permutation_test


def _brute(high, low):
    """Every assignment of the pooled values to the high arm, as a plain loop over index subsets."""
    pooled = list(high) + list(low)
    n = len(high)
    observed = sum(high) / n - sum(low) / len(low)
    above = below = total = 0
    for mask in range(1 << len(pooled)):
        idx = [i for i in range(len(pooled)) if mask >> i & 1]
        if len(idx) != n:
            continue
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in idx]
        d = sum(a) / n - sum(b) / len(b)
        total += 1
        above += d >= observed - 1e-12
        below += d <= observed + 1e-12
    return above / total, below / total, total


def test_hand_worked_two_by_two():
    # pooled {1, 2, 3, 4}; high = {3, 4}: D = 3.5 - 1.5 = 2. The six splits of the high arm give
    # D = {1,2}: -2, {1,3}: -1, {1,4}: 0, {2,3}: 0, {2,4}: 1, {3,4}: 2 -> only one is >= 2: p = 1/6;
    # all six are <= 2: p_reverse = 1.
    r = permutation_test([3.0, 4.0], [1.0, 2.0])
    assert r.exact and r.splits == 6 and r.difference == 2.0
    assert r.p_value == pytest.approx(1 / 6) and r.p_reverse == 1.0


def test_hand_worked_ties_count_as_at_least():
    # every value equal: every split has D = 0 = observed, so p = p_reverse = 1
    r = permutation_test([0.5, 0.5, 0.5], [0.5, 0.5])
    assert r.p_value == 1.0 and r.p_reverse == 1.0 and r.splits == 10


def test_hand_worked_three_against_three_fully_ordered():
    # high holds the three largest of six: one split of C(6, 3) = 20 reaches D_obs -> p = 0.05
    r = permutation_test([0.9, 0.8, 0.7], [0.1, 0.2, 0.3])
    assert r.p_value == pytest.approx(1 / 20) and r.p_reverse == 1.0


@pytest.mark.parametrize("case", range(12))
def test_exact_test_matches_a_brute_force_loop(case):
    rng = random.Random(case)
    n, m = rng.randint(1, 6), rng.randint(1, 6)
    # values on a coarse grid, so ties between splits are common
    high = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) + 0.1 * (case % 3) for _ in range(n)]
    low = [rng.choice([0.0, 0.25, 0.5, 0.75, 1.0]) for _ in range(m)]
    r = permutation_test(high, low)
    p, p_rev, total = _brute(high, low)
    assert r.exact and r.splits == total
    assert r.p_value == pytest.approx(p) and r.p_reverse == pytest.approx(p_rev)


def test_monte_carlo_branch_is_close_to_the_exact_value_and_never_zero(monkeypatch):
    rng = random.Random(7)
    high = [rng.gauss(0.3, 0.1) for _ in range(8)]
    low = [rng.gauss(0.2, 0.1) for _ in range(8)]
    exact = permutation_test(high, low)
    monkeypatch.setattr(stats, "EXACT_LIMIT", 10)
    mc = permutation_test(high, low, resamples=20_000)
    assert not mc.exact and mc.splits == 20_000
    assert abs(mc.p_value - exact.p_value) < 0.01  # SE of a 20 000-draw estimate is <= 0.0036
    separated = permutation_test([1.0] * 8, [0.0] * 8, resamples=500)
    assert 0 < separated.p_value <= 1 / 501 + 1e-12


def test_bad_inputs_are_errors():
    with pytest.raises(ValueError):
        permutation_test([], [1.0])
    with pytest.raises(ValueError):
        permutation_test([float("nan")], [1.0])


def _values(high, low):
    return {"a": dict(enumerate(high)), "b": dict(enumerate(low))}


def test_claim_verdicts_from_the_test():
    claim = Claim("x", "a above b", "m", "a", "b")
    sep = decide(claim, _values([0.6 + 0.01 * i for i in range(8)], [0.1 + 0.01 * i for i in range(8)]))
    assert sep.verdict is Verdict.SEPARATED and sep.test.p_value == pytest.approx(1 / 12870)
    rev = decide(claim, _values([0.1] * 8, [0.5] * 8))
    assert rev.verdict is Verdict.REVERSED
    mixed = [0.1, 0.5, 0.2, 0.4, 0.3, 0.6, 0.35, 0.45]
    assert decide(claim, _values(mixed, list(reversed(mixed)))).verdict is Verdict.NOT_SEPARATED
    few = decide(claim, _values([0.9, 0.8], [0.1, 0.2]))
    assert few.verdict is Verdict.UNDECIDED and "fewer than 8" in few.notes[0]
    assert decide(claim, {"a": {0: 1.0}}).verdict is Verdict.MISSING
    assert "SEPARATED" in sep.line() and "p = 0.0001" in sep.line()


def test_registered_claims_are_the_three_of_the_protocol():
    assert [(c.metric, c.high_arm, c.low_arm, c.alpha) for c in REGISTERED] == [
        ("hack_rate", "nocheck", "full", 0.05), ("lazy_rate", "nopr", "full", 0.05),
        ("fast1.2", "full", "nopr", 0.05)]
    assert all(isinstance(c, Claim) for c in REGISTERED)
    with pytest.raises(dataclasses.FrozenInstanceError):
        REGISTERED[0].alpha = 0.5

