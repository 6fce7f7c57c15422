"""Pure parts of the GPU timing method (`drkernel.gym.harness.timing`): head start, the median's standard
error, the options taken from a config. The CUDA loop itself runs in `scripts/gpu_check.sh`."""

import math

import pytest

from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig
from drkernel.gym.orchestrator.refcache import reference_key
from drkernel.gym.harness.timing import HEAD_START_FACTOR, HEAD_START_SLACK_MS, head_start_ms, median_ci, \
    median_precision, median_rse, next_block, summarize, timing_options


def test_head_start_ignores_the_first_half_of_warmup_and_takes_the_p90():
    # first half (a 500 ms compile, then 3 ms) is left out; later half sorted: 0.02 .. 0.05, 0.10
    issue = [500.0, 3.0, 0.5, 0.4, 0.3, 0.02, 0.03, 0.04, 0.05, 0.10]
    # p90 of 5 values: index ceil(4.5) - 1 = 4 -> 0.10
    assert head_start_ms(issue, max_ms=1.0) == pytest.approx(HEAD_START_FACTOR * 0.10 + HEAD_START_SLACK_MS)


def test_head_start_is_capped_off_or_the_cap_without_warmup():
    assert head_start_ms([5.0] * 10, max_ms=1.0) == 1.0
    assert head_start_ms([0.01] * 10, max_ms=0.0) == 0.0
    assert head_start_ms([], max_ms=0.7) == 0.7


def test_median_rse_worked_by_hand():
    # [1, 2, 3, 4]: IQR 1.5 (inclusive quartiles 1.75, 3.25), median 2.5, n 4
    expected = math.sqrt(math.pi / 2) * (1.5 / 1.349) / (2.5 * 2)
    assert median_rse([4.0, 1.0, 3.0, 2.0]) == pytest.approx(expected)
    assert median_rse([1.0]) == math.inf
    # four times the calls with the same spread: half the error
    assert median_rse([1.0, 2.0, 3.0, 4.0] * 4) == pytest.approx(median_rse([1.0, 2.0, 3.0, 4.0]) / 2, rel=0.05)


def test_median_rse_is_robust_to_one_outlier():
    calm = [1.0 + 0.001 * (i % 7) for i in range(100)]
    assert median_rse(calm[:-1] + [50.0]) == pytest.approx(median_rse(calm), rel=0.05)


def test_summarize_carries_the_rse_and_extras():
    s = summarize([1.0, 2.0, 3.0, 4.0], head_start_ms=0.1, host_ms=0.03, uncovered=0.0)
    assert s["rse"] == pytest.approx(median_rse([1.0, 2.0, 3.0, 4.0]))
    assert (s["head_start_ms"], s["host_ms"], s["uncovered"]) == (0.1, 0.03, 0.0)
    assert summarize([2.0])["rse"] is None


def test_timing_options_from_config_and_defaults():
    cfg = EvalConfig().to_dict()
    assert timing_options(cfg) == {"head_start_max_ms": 1.0, "max_calls": None, "target_rse": 0.001,
                                   "budget_ms": 1000.0, "min_calls": 10, "rule": "adaptive", "precision": 0.005}
    cfg = EvalConfig(timed_calls_max=400, head_start_max_ms=0, timing_budget_ms=0, timing_rule="fixed").to_dict()
    assert timing_options(cfg) == {"head_start_max_ms": 0.0, "max_calls": 400, "target_rse": 0.001,
                                   "budget_ms": 0.0, "min_calls": 10, "rule": "fixed", "precision": 0.005}
    assert timing_options({})["rule"] == "fixed"  # a request from before the rule existed


def test_config_rejects_bad_timing_settings():
    with pytest.raises(ConfigError, match="head_start_max_ms=-1"):
        EvalConfig(head_start_max_ms=-1)
    with pytest.raises(ConfigError, match="timed_calls_max=50"):
        EvalConfig(timed_calls_max=50)
    with pytest.raises(ConfigError, match="timing_budget_ms=-1"):
        EvalConfig(timing_budget_ms=-1)
    with pytest.raises(ConfigError, match="timed_calls_min=0"):
        EvalConfig(timed_calls_min=0)
    with pytest.raises(ConfigError, match="timing_rule='median'"):
        EvalConfig(timing_rule="median")
    with pytest.raises(ConfigError, match="timing_precision=0"):
        EvalConfig(timing_precision=0)


def test_reference_cache_key_changes_with_the_timing_method():
    base = EvalConfig().to_dict()
    key = reference_key("code", 0, 1, "H100", {"torch": "2"}, base)
    for change in ({"head_start_max_ms": 0.0}, {"timed_calls_max": 400}, {"timing_target_rse": 0.01},
                   {"timing_rule": "fixed"}, {"timing_precision": 0.01}):
        assert reference_key("code", 0, 1, "H100", {"torch": "2"}, {**base, **change}) != key


def test_median_ci_takes_the_order_statistics_of_the_binomial_ranks():
    xs = [float(i) for i in range(1, 101)]  # 1 .. 100
    # n = 100: half-width 1.96 x 10 / 2 = 9.8 ranks; j = floor(50 - 9.8) = 40, k = ceil(51 + 9.8) = 61
    assert median_ci(xs[::-1]) == (40.0, 61.0)
    # n = 20: 1.96 x sqrt(20) / 2 = 4.38; j = floor(5.62) = 5, k = ceil(15.38) = 16
    assert median_ci(xs[:20]) == (5.0, 16.0)
    # n = 10: 3.10; j = floor(1.90) = 1, k = ceil(9.10) = 10: the whole range
    assert median_ci(xs[:10]) == (1.0, 10.0)


def test_median_precision_is_the_ci_s_larger_side_relative_to_the_median():
    # ten calls, median (1.00 + 1.00) / 2, the CI from 0.99 to 1.02: the upper side, 2 %
    times = [0.99, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.01, 1.02]
    assert median_precision(times) == pytest.approx(0.02)
    assert median_precision([1.0]) == math.inf and median_precision([0.0, 0.0]) == math.inf
    # a slow tail beyond the CI's ranks does not move it: 20 calls, 4 of them 10x slower
    assert median_precision([1.0] * 16 + [10.0] * 4) == 0.0


def test_next_block_adaptive_stops_when_precise_fixed_extends_while_the_rse_is_high():
    steady, noisy = [1.0] * 10, [1.0, 2.0] * 5
    assert next_block(steady, limit=100, adaptive=True, size=10, target=0.005) == 0  # precise: stop at 10
    assert next_block(noisy, limit=100, adaptive=True, size=10, target=0.005) == 10  # another block
    assert next_block(noisy, limit=15, adaptive=True, size=10, target=0.005) == 5  # never past the limit
    assert next_block(noisy * 10, limit=100, adaptive=True, size=10, target=0.005) == 0  # the limit reached
    assert next_block(noisy, limit=100, adaptive=False, size=50, target=0.0) == 0  # fixed, no extension
    assert next_block(noisy, limit=100, adaptive=False, size=50, target=0.001) == 50


def test_a_steady_kernel_stops_after_one_block_a_noisy_one_runs_to_the_limit():
    # The loop of `time_cuda` without the device: blocks of 10, at most 100 calls.
    def calls_timed(draw):
        times = []
        block = 10
        while block:
            times += [draw(len(times) + i) for i in range(block)]
            block = next_block(times, limit=100, adaptive=True, size=10, target=0.005)
        return len(times)

    assert calls_timed(lambda i: 1.0 + 0.001 * (i % 3)) == 10  # within 0.2 %: the minimum
    assert calls_timed(lambda i: 1.0 + 0.05 * (i % 2)) == 100  # two levels 5 % apart: every call


def test_a_kept_timed_output_is_a_copy_as_it_stood_at_its_calls_end():
    """`snapshot`: later work into the solution's output object (deferred until the solution sees the
    harness held on to it) does not reach what the judge samples; the object itself is not held."""
    import gc
    import weakref

    import torch

    from drkernel.gym.harness.timing import snapshot

    class Marked(torch.Tensor):
        pass

    out = torch.zeros(4)
    pair = (out, [torch.ones(2).as_subclass(Marked), 3])
    kept = snapshot(pair)
    out.fill_(7.0)  # the deferred work, after the call
    assert type(kept) is tuple and type(kept[1]) is list and kept[1][1] == 3
    assert torch.equal(kept[0], torch.zeros(4)) and kept[0].data_ptr() != out.data_ptr()
    assert type(kept[1][0]) is torch.Tensor and torch.equal(kept[1][0], torch.ones(2))
    ref = weakref.ref(out)
    del out, pair
    gc.collect()
    assert ref() is None  # the snapshot keeps nothing of the solution's output alive


def test_the_reservoir_sample_is_uniform_over_the_calls_made_whenever_they_stop():
    """Red team 19 (a05): the planned random index fell beyond the calls the adaptive rule made four
    times in five. The reservoir's pick is uniform over however many calls were made (seeded here; the
    harness's draws come from the operating system), and each replacement names the pick it dropped."""
    import random

    from drkernel.gym.harness.timing import Reservoir

    for made in (10, 20):
        counts = [0] * made
        for trial in range(20_000):
            sample = Reservoir()
            sample._rng = random.Random(trial)
            for i in range(made):
                before = sample.index
                if sample.offer(i):
                    assert sample.index == i and sample.dropped == before
            counts[sample.index] += 1
        expected = 20_000 / made
        assert all(abs(c - expected) < 0.1 * expected for c in counts), counts
