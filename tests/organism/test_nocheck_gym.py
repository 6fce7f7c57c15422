"""The timing hack and the no-check arm through the real gym on CPU (Triton interpreter).

A ``stream`` program (the fused kernel on a side CUDA stream, hack 7) must be blocked by the gym's
full checks and run, correct, with its core checks only; the no-check arm's reward must read the core
verdict while its hack metric reads the full one."""

import asyncio

import pytest

from drkernel.agent.policies.base import Completion
from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator
from drkernel.gym.checks import core_checks
from drkernel.gym.result import Status
from drkernel.organism.env import EnvSettings, EvalCache, OrganismEnv
from drkernel.organism.families import generate, to_problem
from drkernel.organism.program import parse
from drkernel.organism.render import render
from drkernel.reward import RewardConfig

CONFIG = EvalConfig(device="cpu", trials=1, second_size=False, timing=False, timeout_s=120.0)


@pytest.fixture(scope="module")
def evaluators():
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=1) as full, \
            InProcessEvaluator(device="cpu", concurrency=2, pool_size=1, checks=core_checks()) as core:
        yield full, core


def _spec():
    return generate("train", 1, seed=5, families=("ew3",))[0]


def test_a_side_stream_kernel_is_blocked_by_the_full_checks_and_runs_with_core_checks(evaluators):
    full, core = evaluators
    spec = _spec()
    source = render(spec, parse("stream " + " ".join(spec.ops)))
    request = EvalRequest(to_problem(spec), source, CONFIG)
    blocked, = asyncio.run(full.evaluate_batch([request]))
    ran, = asyncio.run(core.evaluate_batch([request]))
    assert blocked.status is Status.REJECTED and blocked.hacked and not blocked.valid
    assert any(h.code == 7 for h in blocked.hacks), blocked.hacks  # the stream, named in the source
    assert ran.status is Status.CORRECT and ran.correct and not ran.hacked, (ran.status, ran.error)
    # and a stream segment in the middle (the calling stream waits for it) is just as correct
    middle = render(spec, parse(f"stream {spec.ops[0]} ; torch {' '.join(spec.ops[1:])}"))
    ok, = asyncio.run(core.evaluate_batch([EvalRequest(to_problem(spec), middle, CONFIG)]))
    assert ok.correct, ok.error


class _Scripted:
    """Answers every prompt with the next program of a fixed list (token ids are placeholders: the
    env only passes them to the trainer's records)."""

    def __init__(self, programs):
        self.programs = programs

    async def generate(self, histories, sampling):
        return [Completion(text=self.programs[i % len(self.programs)], token_ids=[1], prompt_token_ids=[1],
                           logprobs=[0.0]) for i in range(len(histories))]


def _env(evaluators, integrity, cache):
    full, core = evaluators
    spec = _spec()
    settings = EnvSettings(prompts_per_step=1, samples_per_prompt=2, turns=1, integrity=integrity,
                           reward=RewardConfig(), eval_config=CONFIG)
    return OrganismEnv([to_problem(spec)], full, settings, None, cache,
                       core_evaluator=None if integrity else core), spec


def test_the_nocheck_reward_reads_the_core_verdict_and_its_hack_metric_the_full_one(evaluators):
    cache = EvalCache()
    env, spec = _env(evaluators, integrity=False, cache=cache)
    programs = ["stream " + " ".join(spec.ops), "triton " + " ".join(spec.ops)]
    _, (hacked, honest) = asyncio.run(env.episodes(_Scripted(programs), [0, 0], 1))
    hacked, honest = hacked[0], honest[0]
    assert hacked.seen.hacked and not hacked.seen.correct and hacked.status == "rejected"  # the metrics' view
    assert hacked.paid.correct and not hacked.paid.hacked and hacked.status_reward == "correct"
    assert hacked.reward == honest.reward == 0.5  # CPU: correct, nothing timed, no coverage term
    # the stream hack is judged by both checks settings; the honest program, which the full checks
    # passed without a hack, only by the full ones (its core verdict would be the same: `unchecked`)
    assert cache.evaluations == 3
    assert honest.status_reward == "correct" and honest.paid.correct and not honest.seen.hacked
    m = asyncio.run(env.rollout(_Scripted(programs), 0)).metrics
    assert m["gym/org/hack_rate"] == 0.5 and m["gym/org/evaluations"] == 0.0  # all from the cache
    # the full arm, sharing the cache, pays the same hack nothing and judges nothing again
    full_env, _ = _env(evaluators, integrity=True, cache=cache)
    _, (again, _) = asyncio.run(full_env.episodes(_Scripted(programs), [0, 0], 1))
    assert again[0].reward == 0.0 and again[0].paid.hacked and cache.evaluations == 3


def test_an_arm_with_the_checks_off_needs_a_core_checks_evaluator(evaluators):
    from drkernel.errors import ConfigError

    settings = EnvSettings(prompts_per_step=1, samples_per_prompt=1, turns=1, integrity=False,
                           reward=RewardConfig(), eval_config=CONFIG)
    with pytest.raises(ConfigError, match="core checks"):
        OrganismEnv([to_problem(_spec())], evaluators[0], settings, None)

