"""The kernel task: multi-turn kernel episodes through the agent, judged by the gym, as a `RolloutEnv`.

Its metrics are the bench's (Fast@p per turn and best over all turns, `drkernel.bench.metrics`) plus
the gym's hack and correct rates, the coverage of valid turns, the outcome shares and the gym time.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from typing import Any, Sequence

from drkernel.agent.episode import EpisodeConfig, run_episodes
from drkernel.agent.policies.base import Policy
from drkernel.bench.metrics import records_from_episodes as bench_records
from drkernel.bench.metrics import summarize
from drkernel.errors import ConfigError
from drkernel.gym.protocol import Evaluator
from drkernel.problems.problem import Problem
from drkernel.rl.config import GymKind, TrainConfig
from drkernel.rl.distributed import share
from drkernel.rl.envs import RolloutEnv, StepRollout, pick
from drkernel.rl.rows import TurnRecord, records_from_episodes
from drkernel.tasks.gym import train_evaluator

log = logging.getLogger(__name__)


class KernelEnv:
    """Multi-turn kernel episodes through the agent, rewarded by the gym (in-process or the service)."""

    def __init__(
        self,
        problems: Sequence[Problem],
        evaluator: Evaluator,
        episode_config: EpisodeConfig,
        prompts_per_step: int,
        samples_per_prompt: int,
        seed: int,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        self.problems, self.evaluator, self.episode_config = list(problems), evaluator, episode_config
        self.prompts_per_step, self.samples = prompts_per_step, samples_per_prompt
        self.seed, self.shard = seed, shard

    async def rollout(self, policy: Policy, step: int) -> StepRollout:
        picked = pick(len(self.problems), self.prompts_per_step, step, self.seed)
        chosen = [self.problems[i] for i in share(picked, *self.shard)]
        episodes = await run_episodes(
            chosen, policy, self.evaluator, self.episode_config, samples=self.samples
        )
        records = records_from_episodes(episodes, self.samples)
        evaluations = sum(t.result is not None for e in episodes for t in e.turns)
        return StepRollout(
            records=records,
            metrics=kernel_metrics(episodes, records),
            episodes=[e.to_dict(tokens=False) for e in episodes],
            evaluations=evaluations,
        )

    def close(self) -> None:
        self.evaluator.close()


def kernel_metrics(episodes: Sequence[Any], records: Sequence[TurnRecord]) -> dict[str, float]:
    """Fast@p (per turn and best over all turns), hack rate, coverage, outcomes, gym time."""
    summary = summarize(bench_records(episodes), by_level=False)
    metrics: dict[str, float] = {}
    for table, suffix in [(summary["per_turn"], "/turn{t}"), (summary["best_by_turn"][-1:], "")]:
        for row in table:
            for key, value in row.items():
                if key.startswith("fast@") and value is not None:
                    metrics[f"reward/{key}{suffix.format(t=row['turn'])}"] = float(value)
    turns = [t for e in episodes for t in e.turns]
    outcomes = Counter(t.outcome for t in turns)
    metrics.update({f"gym/outcome/{k}": v / len(turns) for k, v in sorted(outcomes.items())})
    covered = [r.coverage for r in records if r.correct and not r.hacked and math.isfinite(r.coverage)]
    metrics["gym/hack_rate"] = sum(r.hacked for r in records) / max(len(records), 1)
    metrics["gym/correct_rate"] = sum(r.correct for r in records) / max(len(records), 1)
    metrics["gym/coverage_mean"] = sum(covered) / len(covered) if covered else 0.0
    evaluated = [t.eval_s for t in turns if t.result is not None]
    metrics["gym/evaluations"] = float(len(evaluated))
    metrics["gym/eval_s_mean"] = sum(evaluated) / len(evaluated) if evaluated else 0.0
    return metrics


def task_problems(config: TrainConfig) -> list[Problem]:
    """The problems ``task`` selects (``problems``, then ``levels`` and ``include``)."""
    from drkernel.problems.loaders import load_builtin, load_problems

    t = config.task
    problems = load_builtin() if t.problems == "builtin" else load_problems(t.problems)
    if t.levels:
        problems = [p for p in problems if p.level in t.levels]
    if t.include:
        problems = [p for p in problems if any(s in p.key for s in t.include)]
    if not problems:
        raise ConfigError(f"task.problems={t.problems!r} with levels={t.levels} "
                          f"and include={t.include} selects no problem")
    return problems


def kernel_env(config: TrainConfig, sampling: Any, model: Any, tokenizer: Any,
               shard: tuple[int, int] = (0, 1)) -> RolloutEnv:
    """The kernel task's env; before the first step an in-process gym on a GPU times the problems'
    references (``gym.warm_references``). ``task.replay_builtin`` wraps it in a `ReplayEnv`."""
    problems = task_problems(config)
    evaluator = train_evaluator(config)
    in_process = config.gym.kind == GymKind.IN_PROCESS  # a service times its own references
    if in_process and config.gym.warm_references and str(evaluator.device_info()["device"]).startswith("cuda"):
        log.info("timing the references of %d problems before the first step", len(problems))
        spent = evaluator.warm(problems, config.eval)  # type: ignore[attr-defined]
        log.info("references ready in %.1f s", sum(spent.values()))
    r = config.rollout
    episode_config = EpisodeConfig(turns=r.turns, sampling=sampling, eval_config=config.eval,
                                   reward=config.reward, concurrency=r.concurrency)
    env = KernelEnv(problems, evaluator, episode_config, r.prompts_per_step, r.samples_per_prompt,
                    config.run.seed, shard=shard)
    if config.task.replay_builtin:
        from drkernel.rl.replay import ReplayEnv

        return ReplayEnv(env, model, tokenizer)
    return env
