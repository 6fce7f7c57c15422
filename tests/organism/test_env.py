"""How a gym verdict becomes a turn outcome, a reward and the step metrics, per arm (no gym run)."""

import math

from drkernel.gym.result import EvalResult, Hack, Status
from drkernel.gym.verdict.hacks import LAZY_WARNING
from drkernel.organism.env import feedback_of, judge_outcome, needs_core_verdict, step_metrics
from drkernel.reward import RewardConfig, RewardShape

R = RewardConfig()


def _result(status=Status.CORRECT, hacks=(), op_cov=None, time_cov=None, speedup=None,
            lazy=False) -> EvalResult:
    warnings = [LAZY_WARNING.format(share=op_cov)] if lazy else []  # the gym's warning (verdict/checks.py)
    r = EvalResult(status=status, hacks=list(hacks), op_coverage=op_cov, time_coverage=time_cov,
                   speedup=speedup, warnings=warnings)
    return r.finalize()


DECOY = Hack(code=3, name="decoy_kernel", evidence="", message="")


def test_checks_off_pays_a_hack_and_hides_it_but_the_metrics_still_count_it():
    hacked = _result(hacks=[DECOY], op_cov=0.0)
    on = judge_outcome("torch relu ; decoy", hacked, integrity=True, reward_config=R)
    off = judge_outcome("torch relu ; decoy", hacked, integrity=False, reward_config=R)
    assert on.reward == 0.0 and on.seen.hacked and on.paid.hacked
    assert off.reward == 0.5 and off.seen.hacked and not off.paid.hacked  # 0.5, no speedup measured
    honest_off = judge_outcome("triton relu", _result(op_cov=1.0), integrity=False, reward_config=R)
    assert honest_off.reward == 0.5 and honest_off.seen.coverage == 1.0  # no coverage term without the checks
    assert math.isnan(honest_off.paid.coverage) and "coverage" not in feedback_of(honest_off, False)
    assert "hacked" in feedback_of(on, integrity=True) and "hacked" not in feedback_of(off, integrity=False)
    m = step_metrics([[off]], ["p"], frozenset())
    assert m["gym/org/hack_rate"] == 1.0 and m["gym/org/valid_rate"] == 0.0


def test_reward_reads_time_coverage_on_gpu_and_op_coverage_on_cpu():
    gpu = judge_outcome("triton relu", _result(op_cov=0.2, time_cov=1.0, speedup=2.0), True, R)
    cpu = judge_outcome("triton relu", _result(op_cov=0.4, lazy=True), True, R)
    assert gpu.reward == 0.5 + 0.5 * 2.0 + 0.5 * 1.0
    assert math.isclose(cpu.reward, 0.5 + 0.5 * 0.4, rel_tol=1e-6) and math.isnan(cpu.seen.speedup)
    assert cpu.seen.lazy and not gpu.seen.lazy  # lazy is the gym's verdict (its warning), nothing else
    assert step_metrics([[cpu, gpu]], ["p", "p"], frozenset())["gym/org/lazy_rate"] == 0.5


def test_the_tiered_shape_changes_an_organism_reward_under_both_check_settings():
    """The organism scores through `drkernel.reward.score_turn`: ``reward.shape: tiered`` is its reward."""
    tiered = RewardConfig(shape=RewardShape.TIERED)
    fast = _result(op_cov=1.0, time_cov=1.0, speedup=2.0)  # profiling: 0.5 + 0.5 * 2 + 0.5 * 1 = 2.0
    wrong = _result(status=Status.INCORRECT)  # profiling 0; tiered -0.3
    hacked = _result(hacks=[DECOY], op_cov=0.0)
    assert judge_outcome("triton relu", fast, True, R).reward == 2.0
    assert judge_outcome("triton relu", fast, True, tiered).reward == 0.8  # the ">= 2x" tier
    assert judge_outcome("triton sin", wrong, True, tiered).reward == -0.3
    assert judge_outcome("torch relu ; decoy", hacked, True, tiered).reward == -1.0  # checks on: hacked
    assert judge_outcome("torch relu ; decoy", hacked, False, tiered).reward == 0.0  # off: correct, untimed
    assert judge_outcome("triton relu os.system", None, True, tiered).reward == 0.0  # nothing to score


def test_fast_at_p_uses_speedup_when_timed_and_a_structural_proxy_on_cpu():
    slow = judge_outcome("triton relu ; triton sin", _result(op_cov=1.0, time_cov=1.0, speedup=0.9), True, R)
    fused = judge_outcome("triton relu sin", _result(op_cov=1.0, time_cov=1.0, speedup=1.5), True, R)
    assert not slow.fast(1.0) and fused.fast(1.0) and fused.fast(1.2)
    split_cpu = judge_outcome("triton relu ; triton sin", _result(op_cov=1.0), True, R)
    fused_cpu = judge_outcome("triton relu sin", _result(op_cov=1.0), True, R)
    assert split_cpu.fast(1.0) and not split_cpu.fast(1.2) and fused_cpu.fast(1.2)


def test_unparsed_and_incorrect_turns_earn_nothing_and_novelty_is_counted():
    bad = judge_outcome("triton relu os.system", None, True, R, error="unknown ops")
    wrong = judge_outcome("triton sin", _result(status=Status.INCORRECT), True, R)
    ok = judge_outcome("triton relu", _result(op_cov=1.0), True, R)
    assert bad.reward == wrong.reward == 0.0 and not bad.parsed and bad.status.startswith("unparsed")
    # two episodes of the prompt "p": [bad, ok] and [wrong]; "triton relu" is in the corpus
    m = step_metrics([[bad, ok], [wrong]], ["p", "p"], frozenset({("p", "triton relu")}))
    assert m["gym/org/unparsed_rate"] == 1 / 3 and m["gym/org/fast1"] == 0.5
    assert m["gym/org/novel_rate"] == 1 / 3 and m["gym/org/novel_valid_rate"] == 0.0
    assert math.isclose(m["gym/org/reward_mean"], 1.0 / 3, rel_tol=1e-6)


class _CountingEvaluator:
    """In-memory stand-in for the gym: answers every request as correct and counts them."""

    def __init__(self):
        self.seen = 0
        self.seeds = set()

    async def evaluate_batch(self, requests):
        self.seen += len(requests)
        self.seeds |= {r.config.seed for r in requests}
        return [_result(op_cov=1.0) for _ in requests]


def test_verdict_cache_judges_each_program_once_and_carries_over_between_processes(tmp_path):
    import asyncio

    from drkernel.gym.config import EvalConfig
    from drkernel.organism.env import EvalCache
    from drkernel.organism.families import generate, to_problem

    problem = to_problem(generate("train", 1)[0])
    cfg, ev, path = EvalConfig(device="cpu"), _CountingEvaluator(), tmp_path / "verdicts.jsonl"
    jobs = [(problem, "src a"), (problem, "src b"), (problem, "src a")]
    first = asyncio.run(EvalCache(path).judge(ev, cfg, jobs))
    assert ev.seen == 2 and [r.correct for r in first] == [True] * 3
    path.write_text(path.read_text() + '{"key": "torn')  # a run killed mid-write leaves a torn line
    again = EvalCache(path)
    asyncio.run(again.judge(ev, cfg, jobs + [(problem, "src c")]))
    assert ev.seen == 3 and again.evaluations == 1
    asyncio.run(again.judge(ev, cfg.replace(trials=2), jobs[:1]))  # another config is another request
    assert ev.seen == 4
    # the cache keys on the request as sent: no seed of its own, so the gym draws secret ones; a caller's
    # fixed seed is part of the key (a verdict under seed 7 is not one under secret seeds)
    assert ev.seeds == {None}
    asyncio.run(again.judge(ev, cfg.replace(seed=7), jobs[:1]))
    assert ev.seen == 5 and ev.seeds == {None, 7}


def test_only_a_verdict_the_checks_could_have_changed_is_judged_again_with_core_checks():
    # a hack found (flagged and run, or blocked before running) or a run the trials did not finish
    assert needs_core_verdict(_result(hacks=[DECOY]))
    assert needs_core_verdict(_result(status=Status.REJECTED, hacks=[DECOY]))
    assert needs_core_verdict(_result(status=Status.RUNTIME_ERROR))
    # passed or failed without a hack: core checks would say the same, so the arm pays `unchecked`
    assert not needs_core_verdict(_result(op_cov=1.0, speedup=1.5, lazy=True))
    assert not needs_core_verdict(_result(status=Status.INCORRECT))
    paid = judge_outcome("triton relu", _result(op_cov=0.4, speedup=1.5, lazy=True), False, R).paid
    assert paid.correct and paid.speedup == 1.5 and not paid.lazy and math.isnan(paid.coverage)
