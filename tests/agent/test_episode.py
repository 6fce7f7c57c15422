"""Multi-turn flow with the scripted policy and an in-memory evaluator."""

import asyncio

import pytest

from agent.fakes import TableEvaluator
from drkernel.agent import EpisodeConfig, ScriptedPolicy, TTSConfig, run_episodes
from drkernel.errors import ConfigError
from drkernel.gym import EvalResult, Hack, Status, TimingStats, TrialResult
from drkernel.problems import Problem

REF = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""
PROBLEM = Problem(name="relu", level=1, code=REF, problem_id="relu", source="builtin")
OTHER = Problem(
    name="other", level=2, code=REF.replace("relu(x)", "relu(x) * 2"), problem_id="other", source="builtin"
)


def answer(tag: str) -> str:
    return f"<answer>\n```python\n# {tag}\nimport triton\n@triton.jit\ndef k(): pass\nclass ModelNew:\n    pass\n```\n</answer>"


def timing(ms):
    return TimingStats(median_ms=ms, iqr_ms=0.0, cv=0.0, mean_ms=ms, min_ms=ms, n=100)


TABLE = {
    "BROKEN": lambda: EvalResult(
        status=Status.COMPILE_ERROR,
        error="Traceback\n  ...\nCompilationError: at 3:4: undefined name 'tl.foo'",
    ),
    "WRONG": lambda: EvalResult(
        status=Status.INCORRECT,
        atol=1e-2,
        rtol=1e-2,
        trials=[
            TrialResult(trial=0, seed=0, passed=True, max_abs_err=0.0),
            TrialResult(
                trial=1, seed=1, passed=False, max_abs_err=0.75, max_rel_err=2.5, message="values differ"
            ),
        ],
    ),
    "HACK": lambda: EvalResult(
        status=Status.CORRECT,
        hacks=[
            Hack(
                code=1,
                name="decoy_kernel",
                evidence="0 launches of k",
                message="The Triton kernel is never launched.",
            )
        ],
    ),
    "SLOW": lambda: EvalResult(
        status=Status.CORRECT, speedup=0.5, ref_timing=timing(1.0), sol_timing=timing(2.0), time_coverage=1.0
    ),
    "FAST": lambda: EvalResult(
        status=Status.CORRECT, speedup=2.0, ref_timing=timing(1.0), sol_timing=timing(0.5), time_coverage=0.8
    ),
}


def run(config, problems=(PROBLEM,), samples=1, scripts=None):
    policy = ScriptedPolicy.for_problems(
        scripts or [(PROBLEM, [[answer("BROKEN"), answer("WRONG"), answer("FAST")]])]
    )
    evaluator = TableEvaluator(TABLE)
    episodes = asyncio.run(run_episodes(list(problems), policy, evaluator, config, samples=samples))
    return episodes, policy, evaluator


def test_three_turns_with_feedback_from_each_result():
    (ep,), _, evaluator = run(EpisodeConfig(turns=3))
    assert [t.outcome for t in ep.turns] == ["compile_error", "incorrect", "correct"]
    # reward of FAST: 0.5 + 0.5 * 2.0 + 0.5 * 0.8 = 1.9
    assert [t.reward for t in ep.turns] == [0.0, 0.0, pytest.approx(1.9)]
    assert ep.stop_reason == "max_turns"
    # turn 2's prompt: system, first user, answer 1, feedback 1 (with the error tail)
    roles = [m["role"] for m in ep.turns[1].messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert "CompilationError: at 3:4" in ep.turns[1].messages[-1]["content"]
    assert ep.turns[2].context == [0, 1]
    fb = ep.turns[1].feedback
    assert "trial 2 of 2" in fb and "max abs error 0.75" in fb and "atol=0.01" in fb
    assert "Speedup 2.00x" in ep.turns[2].feedback and "500.0 us" in ep.turns[2].feedback
    assert [r.request_id for r in evaluator.requests] == [f"{PROBLEM.key}#0/t{i}" for i in range(3)]
    conv = ep.conversation()
    assert [m["role"] for m in conv] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert conv[-1]["content"] == answer("FAST")


def test_unparseable_turn_scores_zero_and_skips_the_gym():
    scripts = [(PROBLEM, [["I am not sure how to do this.", answer("FAST")]])]
    (ep,), _, evaluator = run(EpisodeConfig(turns=2), scripts=scripts)
    assert ep.turns[0].outcome == "unparseable" and ep.turns[0].reward == 0 and ep.turns[0].result is None
    assert "no code" in ep.turns[0].feedback
    assert len(evaluator.requests) == 1


def test_history_last_k_and_early_stop():
    (ep,), _, _ = run(EpisodeConfig(turns=3, history="last", history_k=1))
    assert ep.turns[2].context == [1]
    assert [m["role"] for m in ep.turns[2].messages] == ["system", "user", "assistant", "user"]
    scripts = [(PROBLEM, [[answer("SLOW"), answer("FAST"), answer("BROKEN")]])]
    (ep,), _, _ = run(EpisodeConfig(turns=3, early_stop="valid"), scripts=scripts)
    assert len(ep.turns) == 1 and ep.stop_reason == "early_stop"
    (ep,), _, _ = run(EpisodeConfig(turns=3, early_stop="speedup", early_stop_speedup=1.5), scripts=scripts)
    assert len(ep.turns) == 2 and ep.stop_reason == "early_stop"


def test_hack_is_explained_and_scores_zero():
    scripts = [(PROBLEM, [[answer("HACK")]])]
    (ep,), _, _ = run(EpisodeConfig(turns=1), scripts=scripts)
    t = ep.turns[0]
    assert t.outcome == "hacked" and t.reward == 0.0
    assert "decoy_kernel: The Triton kernel is never launched. (observed: 0 launches of k)" in t.feedback


def test_samples_variants_and_order():
    scripts = [(PROBLEM, [[answer("BROKEN")], [answer("FAST")]]), (OTHER, [[answer("SLOW")]])]
    eps, _, _ = run(EpisodeConfig(turns=1), problems=(PROBLEM, OTHER), samples=2, scripts=scripts)
    assert [(e.problem.name, e.sample) for e in eps] == [("relu", 0), ("relu", 1), ("other", 0), ("other", 1)]
    assert sorted(e.turns[0].outcome for e in eps[:2]) == ["compile_error", "correct"]
    assert [e.turns[0].outcome for e in eps[2:]] == ["correct", "correct"]


def test_tts_keeps_the_best_window():
    # iteration 0: 3 turns; then 2 more iterations with a window of 2 selected by reward
    tts = TTSConfig(first_turns=3, iterations=3, window=2, select="reward")
    script = [answer("FAST"), answer("SLOW"), answer("BROKEN"), answer("WRONG"), answer("BROKEN")]
    (ep,), _, _ = run(EpisodeConfig(tts=tts), scripts=[(PROBLEM, [script])])
    assert len(ep.turns) == 5
    # rewards: FAST 1.9, SLOW 0.5+0.25+0.5=1.25, BROKEN 0 -> window (0, 1) scores 3.15
    assert ep.turns[3].context == [0, 1] and ep.turns[4].context == [0, 1]
    assert ep.best_turn().index == 0


def test_config_errors_name_the_values():
    with pytest.raises(ConfigError, match="history='bogus'"):
        EpisodeConfig(history="bogus")
    with pytest.raises(ConfigError, match="conflicts with tts"):
        EpisodeConfig(early_stop="valid", tts=TTSConfig())


def test_tiny_model_drives_episodes_with_tokens_and_logprobs(tiny):
    from drkernel.agent import SamplingParams
    from drkernel.agent.policies.hf_local import HFLocalPolicy

    model, tok = tiny
    policy = HFLocalPolicy(model, tok, batch_size=4)
    config = EpisodeConfig(turns=2, sampling=SamplingParams(max_tokens=8, seed=0))
    evaluator = TableEvaluator(TABLE)
    episodes = asyncio.run(run_episodes([PROBLEM, OTHER], policy, evaluator, config, samples=2))
    assert policy._batcher.batches[0] == 4  # four episodes' first turns in one batch
    for ep in episodes:
        assert len(ep.turns) == 2
        for t in ep.turns:
            assert t.outcome == "unparseable" and t.reward == 0.0
            assert t.prompt_token_ids == policy.encode(t.messages)
            assert 0 < len(t.token_ids) == len(t.logprobs) <= 8
        assert ep.turns[1].messages[-2]["role"] == "assistant"
    assert evaluator.requests == []
