"""`task.kind: organism` through the trainer's own config and env builder."""

from pathlib import Path

import pytest

from drkernel.agent.policies.base import SamplingParams
from drkernel.errors import ConfigError
from drkernel.organism.env import OrganismEnv
from drkernel.rl.config import load_config
from drkernel.rl.trainer import build_env

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_config_builds_an_organism_env():
    config = load_config(REPO / "configs/organism/full.yaml", ["task.problems=train:3:ew2", "eval.device=cpu",
                                                               "gym.pool_size=0"])
    assert config.task.kind == "organism" and config.rollout.turns == 2
    env = build_env(config, SamplingParams(max_tokens=8), None, None)
    try:
        assert isinstance(env, OrganismEnv) and len(env.problems) == 3
        assert env.settings.integrity and env.settings.eval_config.device == "cpu"
        assert all(p.source == "organism" for p in env.problems)
    finally:
        env.close()


def test_a_bad_problem_spec_is_a_config_error():
    config = load_config(REPO / "configs/organism/full.yaml", ["task.problems=train:3:ew9"])
    with pytest.raises(ConfigError):
        build_env(config, SamplingParams(), None, None)
