"""The speedup's interval: order-statistic ranks worked by hand from the binomial, the ratio's bounds,
Fast@p's uncertain count and the reward's lower-bound option."""

import pytest

from drkernel.gym.speedup import fast_p_counts, median_bounds, median_rank, rewarded_speedup, speedup_interval


def test_median_rank_by_hand():
    # n = 5: P(x_(1) <= m <= x_(5)) = 1 - 2 / 32 = 0.9375, so k = 1 at 0.9 and none at 0.95
    assert median_rank(5, 0.9) == 1 and median_rank(5, 0.95) is None
    # n = 10: k = 2 holds 1 - 2 * 11/1024 = 0.9785; k = 3 only 1 - 2 * 56/1024 = 0.8906
    assert median_rank(10, 0.95) == 2 and median_rank(10, 0.975) == 2 and median_rank(10, 0.85) == 3


def test_median_rank_for_many_samples_matches_the_normal_approximation():
    # n = 100 at 0.95: the classic ranks 40 and 61 (n/2 - 1.96 sqrt(n)/2 = 40.2)
    assert median_rank(100, 0.95) == 40
    assert median_rank(10000, 0.95) == 4902  # computed in log space: no overflow


def test_median_bounds_are_order_statistics():
    assert median_bounds([5, 1, 4, 2, 3, 10, 9, 6, 8, 7], 0.95) == (2.0, 9.0)


def test_speedup_interval_divides_the_bounds():
    ref = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]  # median 14.5; k = 2 at 0.975: (11, 18)
    sol = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]       # median 9.5: (6, 13)
    s = speedup_interval(ref, sol, level=0.95)
    assert s.speedup == pytest.approx(14.5 / 9.5)
    assert (s.low, s.high) == (pytest.approx(11 / 13), pytest.approx(18 / 6))
    assert s.contains(1.0) and not s.contains(3.5) and s.low <= s.speedup <= s.high


def test_too_few_samples_or_a_zero_time_give_no_interval():
    assert speedup_interval([1.0] * 5, [1.0] * 100) is None
    assert speedup_interval([1.0] * 20, [0.0] * 20) is None


def test_fast_p_counts_point_estimates_and_open_intervals():
    points = [(2.0, (1.5, 2.5)), (1.1, (0.9, 1.3)), (0.8, (0.7, 0.95)), (None, None), (1.2, None)]
    f = fast_p_counts(points, 1.0)
    assert (f.fast, f.uncertain, f.total) == (3, 1, 5)


def test_reward_lower_bound_option():
    assert rewarded_speedup(2.0, (1.4, 2.6), lower_bound=True) == 1.4
    assert rewarded_speedup(2.0, (1.4, 2.6), lower_bound=False) == 2.0
    assert rewarded_speedup(2.0, None, lower_bound=True) == 2.0


def test_across_runs_widens_each_side_by_the_run_to_run_share():
    from drkernel.gym.speedup import RUN_TO_RUN, SpeedupInterval, across_runs

    wide = across_runs(SpeedupInterval(1.2, 1.19, 1.21, 0.95), rel=0.02)
    assert (wide.speedup, wide.low, wide.high, wide.level) == (1.2, 1.19 * 0.98, 1.21 * 1.02, 0.95)
    assert across_runs(None) is None and 0 < RUN_TO_RUN < 0.1
    # the H100 replay's widest miss: 1.208x then 1.254x, each within-run interval +-0.5 %
    a = across_runs(SpeedupInterval(1.208, 1.202, 1.214, 0.95))
    b = across_runs(SpeedupInterval(1.254, 1.248, 1.260, 0.95))
    assert a.low <= b.high and b.low <= a.high
