"""The composition root: a training config becomes the env the trainer runs on.

``build_env(config, sampling, model, tokenizer, dist)`` picks the task (``task.kind``): the kernel task
(`drkernel.tasks.kernel`: agent episodes judged by the gym, the bench's metrics), the organism
(`drkernel.organism.env`) or the learning-sanity task (`drkernel.rl.envs.SanityEnv`); the gym comes from
the one factory, `drkernel.tasks.gym.make_evaluator`. ``train(config)`` runs the trainer on that env.

Layering: this package sits above `rl`, `organism` and `bench` and is the only one that imports all
three; `rl` imports neither `organism` nor `bench` (tests/gym/test_layout.py).
"""

from __future__ import annotations

import logging
from typing import Any

from drkernel.rl.config import TaskKind, TrainConfig
from drkernel.rl.distributed import DistContext
from drkernel.rl.envs import RolloutEnv, SanityEnv
from drkernel.tasks.gym import make_evaluator, train_evaluator

log = logging.getLogger(__name__)

__all__ = ["build_env", "make_evaluator", "train"]


def build_env(config: TrainConfig, sampling: Any, model: Any, tokenizer: Any,
              dist: DistContext = DistContext()) -> RolloutEnv:
    """The task's rollout env (the gym is started here); with several ranks it samples this rank's share
    of each step's prompts."""
    r, shard = config.rollout, (dist.rank, dist.world_size)
    if config.task.kind == TaskKind.SANITY:
        return SanityEnv(sampling, r.prompts_per_step, r.samples_per_prompt, config.task.sanity_target,
                         config.run.seed, shard=shard)
    if config.task.kind == TaskKind.ORGANISM:
        return organism_env(config, sampling, shard)
    from drkernel.tasks.kernel import kernel_env

    return kernel_env(config, sampling, model, tokenizer, shard)


def organism_env(config: TrainConfig, sampling: Any, shard: tuple[int, int] = (0, 1)) -> RolloutEnv:
    """``task.kind: organism`` for `drkernel train` (integrity checks on; the no-check arm runs through
    ``drkernel organism run --arm nocheck``). The gym's settings are the config's ``eval`` section (its
    seed too: None draws secret seeds; no second-size trial, as in `drkernel organism` runs), the reward
    its ``reward`` section."""
    from drkernel.organism.env import EnvSettings, OrganismEnv
    from drkernel.organism.families import load_split

    problems = load_split("train:16" if config.task.problems == "builtin" else config.task.problems,
                          config.run.seed)
    r = config.rollout
    settings = EnvSettings(prompts_per_step=r.prompts_per_step, samples_per_prompt=r.samples_per_prompt,
                           turns=r.turns, integrity=True, reward=config.reward,
                           eval_config=config.eval.replace(second_size=False), seed=config.run.seed)
    return OrganismEnv(problems, train_evaluator(config), settings, sampling, shard=shard, owns_evaluator=True)


def train(config: TrainConfig) -> list[dict[str, float]]:
    """Run the trainer on the config's task to ``run.steps`` (a module-level function, so
    `drkernel.rl.distributed.launch` can start it on every rank)."""
    from drkernel.rl.trainer import train as run_training

    return run_training(config, build_env)
