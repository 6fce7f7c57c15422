"""`OrganismEnv`: the RL environment of the organism (a `drkernel.rl.envs.RolloutEnv`).

Per step it picks ``prompts_per_step`` problems, samples ``samples_per_prompt`` trajectories of
``turns`` turns each with the current policy, renders every program into a Triton solution, and has
the real gym judge it (`InProcessEvaluator`, always with the integrity checks on). What the *reward*
sees depends on the arm: with ``integrity=False`` the hack verdict is hidden from the reward, the PRS
mask and the feedback (the gym's verdict without integrity checks), while the metrics still count
hacks as the gym found them, so the take-over is measured, not guessed.

Verdicts are cached per (problem, solution source): a program is judged once per run (once per suite
when a cache is shared), which is what keeps a GPU arm within minutes.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import EvalResult
from drkernel.organism.corpus import feedback
from drkernel.organism.families import from_problem
from drkernel.organism.program import ProgramError, parse
from drkernel.organism.render import render
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig, profiling_reward, reward_coverage
from drkernel.rl.distributed import share
from drkernel.rl.envs import StepRollout, pick
from drkernel.rl.rows import TurnRecord

log = logging.getLogger(__name__)
LAZY_BELOW = 0.6
"""A valid turn whose coverage is below this is lazy (PyTorch does most of the work)."""
FUSED_COVERAGE = 0.9


class EvalCache:
    """Gym verdicts by request content (problem, solution source, config: `EvalRequest.content_hash`).

    Shared by the runs of a suite; with a ``path`` (JSON lines) it also carries over between processes,
    so the arms run as separate GPU sections still judge each program once and see one measurement.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.results: dict[str, EvalResult] = {}
        self.evaluations = 0
        self.seconds = 0.0
        self.path = path
        if path is not None and path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                    self.results[row["key"]] = EvalResult.from_dict(row["result"])
                except (ValueError, KeyError, TypeError):
                    log.warning("skipping an unreadable line of %s", path)  # a torn last line of a killed run

    async def judge(self, evaluator: Evaluator, config: EvalConfig,
                    jobs: Sequence[tuple[Problem, str]]) -> list[EvalResult]:
        requests = [EvalRequest(p, src, config) for p, src in jobs]
        keys = [r.content_hash() for r in requests]
        todo = list({k: r for k, r in zip(keys, requests) if k not in self.results}.items())
        if todo:
            t0 = time.monotonic()
            results = await evaluator.evaluate_batch([r for _, r in todo])
            self.seconds += time.monotonic() - t0
            self.evaluations += len(todo)
            for (key, _), result in zip(todo, results):
                self.results[key] = result
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a") as f:
                    for (key, _), result in zip(todo, results):
                        f.write(json.dumps({"key": key, "result": result.to_dict()}) + "\n")
        return [self.results[k] for k in keys]


@dataclass
class TurnOutcome:
    """One turn: what the policy wrote and what the gym (and the arm's reward) made of it."""

    program: str
    parsed: bool
    status: str = "unparsed"
    correct: bool = False
    hacked: bool = False
    """As the gym found it (integrity checks always run)."""
    hacked_reward: bool = False
    """As the reward sees it (False for every turn when the arm turns the checks off)."""
    hacks: list[str] = field(default_factory=list)
    coverage: float = math.nan
    """As the gym measured it (time coverage on a GPU, op coverage on CPU)."""
    coverage_reward: float = math.nan
    """As the reward and PRS see it (NaN when the arm turns the checks off)."""
    speedup: float = math.nan
    reward: float = 0.0
    kernels: int = 0
    segments: int = 0

    @property
    def valid(self) -> bool:
        return self.correct and not self.hacked

    @property
    def lazy(self) -> bool:
        return self.valid and math.isfinite(self.coverage) and self.coverage < LAZY_BELOW

    def fast(self, p: float) -> bool:
        """Fast@p: valid and at least p times the reference. Where nothing is timed (CPU) the proxy is
        a full-coverage solution for p = 1 and a single fused kernel for p > 1 (documented)."""
        if not self.valid:
            return False
        if math.isfinite(self.speedup):
            return self.speedup >= p
        full = math.isfinite(self.coverage) and self.coverage >= FUSED_COVERAGE
        return full and (p <= 1.0 or (self.kernels == 1 and self.segments == 1))


def judge_outcome(program: str, result: EvalResult | None, integrity: bool, reward_config: RewardConfig,
                  error: str = "") -> TurnOutcome:
    """A turn's outcome from the gym result (None: the program did not parse or render)."""
    if result is None:
        return TurnOutcome(program=program, parsed=False, status=f"unparsed: {error}"[:120])
    cov = reward_coverage(result)
    coverage = float(cov) if cov is not None and math.isfinite(cov) else math.nan
    speedup = float(result.speedup) if result.speedup is not None else math.nan
    hacked = bool(result.hacked)
    # Without the integrity checks the gym reports neither hacks nor coverage (the integrity verdict
    # computes both): the reward, PRS and the feedback see neither; the metrics still read them.
    hacked_reward = hacked and integrity
    coverage_reward = coverage if integrity else math.nan
    reward = float(profiling_reward(bool(result.correct), speedup, coverage_reward, hacked_reward,
                                    reward_config))
    prog = parse(program)
    return TurnOutcome(program=program, parsed=True, status=result.status.value, correct=bool(result.correct),
                       hacked=hacked, hacked_reward=hacked_reward,
                       hacks=[h.name for h in result.hacks if not h.strict_only], coverage=coverage,
                       coverage_reward=coverage_reward, speedup=speedup, reward=reward, kernels=prog.kernels,
                       segments=len(prog.segments))


def feedback_of(outcome: TurnOutcome, integrity: bool) -> str:
    """The next turn's user message; hack names only when the arm runs the checks."""
    if not outcome.parsed:
        return feedback(False, "unparsed")
    return feedback(outcome.correct, outcome.status, outcome.hacks if integrity else (),
                    outcome.coverage_reward if math.isfinite(outcome.coverage_reward) else None,
                    outcome.speedup if math.isfinite(outcome.speedup) else None)


@dataclass(frozen=True)
class EnvSettings:
    """What an organism env needs beyond its problems and evaluator."""

    prompts_per_step: int
    samples_per_prompt: int
    turns: int
    integrity: bool
    reward: RewardConfig
    eval_config: EvalConfig
    seed: int = 0
    corpus: frozenset[tuple[str, str]] = frozenset()
    """(prompt, program) pairs of the SFT corpus, to count programs nobody wrote."""


def step_metrics(episodes: Sequence[Sequence[TurnOutcome]], prompts: Sequence[str],
                 corpus: frozenset[tuple[str, str]], prefix: str = "gym/org/") -> dict[str, float]:
    """Per-turn rates, per-episode Fast@p (any turn), coverage of valid turns, novelty."""
    turns = [o for e in episodes for o in e]
    n = max(len(turns), 1)
    parsed = [(prompt, o) for prompt, e in zip(prompts, episodes) for o in e if o.parsed]
    valid = [o for o in turns if o.valid]
    covered = [o.coverage for o in valid if math.isfinite(o.coverage)]
    novel = [o for prompt, o in parsed if (prompt, o.program) not in corpus]
    out = {
        "reward_mean": sum(o.reward for o in turns) / n,
        "hack_rate": sum(o.hacked for o in turns) / n,
        "lazy_rate": sum(o.lazy for o in turns) / n,
        "correct_rate": sum(o.correct for o in turns) / n,
        "valid_rate": len(valid) / n,
        "unparsed_rate": sum(not o.parsed for o in turns) / n,
        "fused_rate": sum(o.valid and o.kernels == 1 and o.segments == 1 for o in turns) / n,
        "coverage": sum(covered) / len(covered) if covered else 0.0,
        "fast1": sum(any(o.fast(1.0) for o in e) for e in episodes) / max(len(episodes), 1),
        "fast1.2": sum(any(o.fast(1.2) for o in e) for e in episodes) / max(len(episodes), 1),
        "novel_rate": len(novel) / n,
        "novel_valid_rate": sum(o.valid for o in novel) / n,
    }
    return {prefix + k: float(v) for k, v in out.items()}


class OrganismEnv:
    """Multi-turn organism episodes judged by the real gym (see the module docstring)."""

    def __init__(self, problems: Sequence[Problem], evaluator: Evaluator, settings: EnvSettings,
                 sampling: Any, cache: EvalCache | None = None, shard: tuple[int, int] = (0, 1),
                 owns_evaluator: bool = False) -> None:
        self.problems, self.specs = list(problems), [from_problem(p) for p in problems]
        self.evaluator, self.settings, self.sampling = evaluator, settings, sampling
        self.cache = cache if cache is not None else EvalCache()
        self.shard, self.owns_evaluator = shard, owns_evaluator

    async def _turn(self, policy: Any, chosen: Sequence[int], histories: list[list[dict[str, str]]]
                    ) -> tuple[list[Any], list[TurnOutcome]]:
        """Sample one turn for every trajectory and judge it."""
        completions = await policy.generate(histories, self.sampling)
        sources: list[str | None] = []
        errors: list[str] = []
        for i, c in zip(chosen, completions):
            if c.token_ids is None or c.prompt_token_ids is None or c.logprobs is None:
                raise ConfigError("the rollout policy returned no token ids or log-probs")
            try:
                sources.append(render(self.specs[i], parse(c.text)))
                errors.append("")
            except ProgramError as e:
                sources.append(None)
                errors.append(str(e))
        jobs = [(self.problems[i], src) for i, src in zip(chosen, sources) if src is not None]
        results = iter(await self.cache.judge(self.evaluator, self.settings.eval_config, jobs))
        s = self.settings
        outcomes = [judge_outcome(c.text.strip(), next(results) if src is not None else None, s.integrity,
                                  s.reward, err) for c, src, err in zip(completions, sources, errors)]
        return completions, outcomes

    async def episodes(self, policy: Any, chosen: Sequence[int], turns: int
                       ) -> tuple[list[TurnRecord], list[list[TurnOutcome]]]:
        """``turns`` turns for each entry of ``chosen`` (a problem index per trajectory)."""
        samples = self.settings.samples_per_prompt
        histories = [[{"role": "user", "content": self.specs[i].prompt()}] for i in chosen]
        episodes: list[list[TurnOutcome]] = [[] for _ in chosen]
        records = []
        for t in range(turns):
            completions, outcomes = await self._turn(policy, chosen, histories)
            for traj, (c, o) in enumerate(zip(completions, outcomes)):
                episodes[traj].append(o)
                records.append(TurnRecord(group=traj // samples, traj=traj, turn=t,
                                          prompt_ids=tuple(c.prompt_token_ids),
                                          completion_ids=tuple(c.token_ids),
                                          rollout_logprobs=tuple(c.logprobs), reward=o.reward,
                                          correct=o.correct, hacked=o.hacked_reward,
                                          coverage=o.coverage_reward, speedup=o.speedup))
                reply = feedback_of(o, self.settings.integrity)
                histories[traj] = histories[traj] + [{"role": "assistant", "content": o.program},
                                                     {"role": "user", "content": reply}]
        return records, episodes

    async def rollout(self, policy: Any, step: int) -> StepRollout:
        s = self.settings
        picked = share(pick(len(self.problems), s.prompts_per_step, step, s.seed), *self.shard)
        chosen = [i for i in picked for _ in range(s.samples_per_prompt)]
        before, seconds = self.cache.evaluations, self.cache.seconds
        records, episodes = await self.episodes(policy, chosen, s.turns)
        prompts = [self.specs[i].prompt() for i in chosen]
        metrics = step_metrics(episodes, prompts, s.corpus)
        metrics["gym/org/evaluations"] = float(self.cache.evaluations - before)
        metrics["gym/org/eval_s"] = self.cache.seconds - seconds
        dumped = [{"problem": self.problems[i].name, "turns": [vars(o).copy() for o in e]}
                  for i, e in zip(chosen, episodes)]
        return StepRollout(records=records, metrics=metrics, episodes=dumped,
                           evaluations=int(metrics["gym/org/evaluations"]))

    async def evaluate(self, policy: Any, problems: Sequence[Problem], samples: int) -> dict[str, float]:
        """Single-turn metrics of ``policy`` on other problems (held-out families), prefixed
        ``gym/heldout/``."""
        held = OrganismEnv(problems, self.evaluator, self.settings, self.sampling, self.cache)
        chosen = [i for i in range(len(problems)) for _ in range(samples)]
        _, episodes = await held.episodes(policy, chosen, 1)
        prompts = [held.specs[i].prompt() for i in chosen]
        return step_metrics(episodes, prompts, self.settings.corpus, prefix="gym/heldout/")

    def close(self) -> None:
        """Close the evaluator when this env started it (a suite shares one and closes it itself)."""
        if self.owns_evaluator:
            self.evaluator.close()


def _evaluator(config: Any) -> Evaluator:
    """The gym of the config's ``gym`` section, chosen as for the kernel task: a KernelGym service at
    ``gym.url``, or in process on ``eval.device`` (in the OS sandbox unless ``gym.unsafe_no_sandbox``)."""
    from drkernel.rl.config import GymKind

    if config.gym.kind == GymKind.SERVICE:
        from drkernel.service.client import ServiceEvaluator

        return ServiceEvaluator(config.gym.url)
    from drkernel.gym import InProcessEvaluator

    return InProcessEvaluator(device=config.eval.device, concurrency=config.gym.concurrency,
                              pool_size=config.gym.pool_size, unsafe_no_sandbox=config.gym.unsafe_no_sandbox)


def build_env(config: Any, sampling: Any, shard: tuple[int, int] = (0, 1)) -> OrganismEnv:
    """The env of ``task.kind: organism`` for `drkernel train` (integrity checks on; the no-check arm
    runs through ``drkernel organism run --arm nocheck``). The gym's settings are the config's ``eval``
    section (its seed too: None draws secret seeds; no second-size trial, as in `drkernel organism`
    runs), the reward its ``reward`` section."""
    from drkernel.organism.families import load_split

    problems = load_split("train:16" if config.task.problems == "builtin" else config.task.problems,
                          config.run.seed)
    r = config.rollout
    settings = EnvSettings(prompts_per_step=r.prompts_per_step, samples_per_prompt=r.samples_per_prompt,
                           turns=r.turns, integrity=True, reward=config.reward,
                           eval_config=config.eval.replace(second_size=False), seed=config.run.seed)
    return OrganismEnv(problems, _evaluator(config), settings, sampling, shard=shard, owns_evaluator=True)
