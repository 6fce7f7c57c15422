"""`task.kind: organism` through the trainer's own config and env builder."""

from pathlib import Path

import pytest

from drkernel.agent.policies.base import SamplingParams
from drkernel.errors import ConfigError
from drkernel.organism.env import OrganismEnv
from drkernel.rl.config import load_config
from drkernel.tasks import build_env

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_config_builds_an_organism_env():
    config = load_config(REPO / "configs/organism/full.yaml", ["task.problems=train:3:ew2", "eval.device=cpu",
                                                               "gym.pool_size=0"])
    assert config.task.kind == "organism" and config.rollout.turns == 2
    env = build_env(config, SamplingParams(max_tokens=8), None, None)
    try:
        assert isinstance(env, OrganismEnv) and len(env.problems) == 3
        assert env.settings.integrity and env.settings.eval_config.device == "cpu"
        assert env.settings.eval_config.trials == 3 and env.settings.reward.coverage_weight == 0.5
        assert all(p.source == "organism" for p in env.problems)
    finally:
        env.close()


def test_a_bad_problem_spec_is_a_config_error():
    config = load_config(REPO / "configs/organism/full.yaml", ["task.problems=train:3:ew9"])
    with pytest.raises(ConfigError):
        build_env(config, SamplingParams(), None, None)


def test_the_gym_section_picks_a_service_and_the_reward_section_is_the_one_paid():
    from drkernel.service.client import ServiceEvaluator

    config = load_config(REPO / "configs/organism/full.yaml", [
        "task.problems=train:2:ew2", "gym.kind=service", "gym.url=http://127.0.0.1:9",
        "reward.coverage_weight=0.0", "eval.trials=4"])
    env = build_env(config, SamplingParams(max_tokens=8), None, None)
    try:
        assert isinstance(env.evaluator, ServiceEvaluator)
        assert env.settings.reward.coverage_weight == 0.0 and env.settings.eval_config.trials == 4
        assert env.settings.eval_config.seed is None  # secret trial seeds
    finally:
        env.close()
