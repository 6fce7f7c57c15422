"""`OrganismEnv`: the RL environment of the organism (a `drkernel.rl.envs.RolloutEnv`).

Per step it picks ``prompts_per_step`` problems, samples ``samples_per_prompt`` trajectories of
``turns`` turns each with the current policy, renders every program into a Triton solution, and has
the real gym judge it. Every program is judged with the gym's full checks (`default_checks`): that
verdict feeds the metrics of every arm, so hack and lazy rates mean the same thing in all of them.
An arm with the hack checks off (``integrity=False``) has each program the full checks could have
judged differently (`needs_core_verdict`: a hack found, or a status other than correct or incorrect)
judged a second time by an evaluator with only the trust boundary's own checks (`core_checks`: no
static analysis, no integrity hook, no hack verdict, no coverage), and its reward, PRS mask and
feedback read that verdict only. So a hack the full checks block before it runs (a kernel on a side
stream) really runs, is really timed, and is paid what the unchecked gym would pay it, while the
metrics still count it as a hack. A program the full checks passed or failed without finding a hack
is paid its full verdict less hacks and coverage (`unchecked`): the timed calls run unobserved in
both, and on the H100 (2026-11-27, six no-check runs, 3317 such turns judged both ways) the core
verdict's status always agreed and its speedup differed by 1.1 % at the median (two measurements).

Verdicts are cached per (checks, problem, solution source) (`drkernel.organism.verdicts.EvalCache`): a
program is judged once per checks setting for the whole suite, which is what keeps a GPU arm within
minutes.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import EvalResult, Status
from drkernel.organism.corpus import feedback
from drkernel.organism.families import from_problem
from drkernel.organism.program import Mode, ProgramError, parse
from drkernel.organism.render import render
from drkernel.organism.verdicts import Checks, EvalCache
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig, TurnScore, score_turn
from drkernel.rl.distributed import share
from drkernel.rl.envs import StepRollout, pick
from drkernel.rl.rows import TurnRecord

log = logging.getLogger(__name__)
FUSED_COVERAGE = 0.9


@dataclass
class TurnOutcome:
    """One turn: what the policy wrote and what the gym (and the arm's reward) made of it.

    Both verdicts are read through `drkernel.reward.score_turn`, under the arm's reward config: ``seen``
    scores the full checks' verdict (the metrics: hack, lazy and valid rates mean the same in every
    arm), ``paid`` the verdict of the arm's own checks (its reward, PRS inputs and feedback)."""

    program: str
    parsed: bool
    status: str = "unparsed"
    """The full checks' status (a program they block before it runs is ``rejected``)."""
    status_reward: str = "unparsed"
    """The status the arm's checks gave."""
    seen: TurnScore = field(default_factory=TurnScore)
    """The full checks' verdict, scored: correct, hacked, lazy, coverage (time coverage on a GPU, op
    coverage on CPU), speedup (a program the full checks block is never timed)."""
    paid: TurnScore = field(default_factory=TurnScore)
    """The arm's checks' verdict, scored: with the checks off it has no hack and no coverage, and a
    side-stream kernel's time is what the events saw."""
    hacks: list[str] = field(default_factory=list)
    kernels: int = 0
    segments: int = 0
    streams: int = 0
    """Segments launched on a side stream (the timing hack)."""

    @property
    def reward(self) -> float:
        return self.paid.reward

    @property
    def valid(self) -> bool:
        return self.seen.valid

    def fast(self, p: float) -> bool:
        """Fast@p: valid and at least p times the reference. Where nothing is timed (CPU) the proxy is
        a full-coverage solution for p = 1 and a single fused kernel for p > 1 (documented)."""
        if not self.valid:
            return False
        if math.isfinite(self.seen.speedup):
            return self.seen.speedup >= p
        full = math.isfinite(self.seen.coverage) and self.seen.coverage >= FUSED_COVERAGE
        return full and (p <= 1.0 or (self.kernels == 1 and self.segments == 1))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"seen": vars(self.seen).copy(), "paid": vars(self.paid).copy()}


def unchecked(result: EvalResult) -> EvalResult:
    """What a gym without the integrity checks would report for ``result``: the same status and timing,
    no hack, no coverage, no warning (stands in for a core-checks verdict of a program both let run)."""
    return dataclasses.replace(result, hacks=[], warnings=[], op_coverage=None, time_coverage=None,
                               kernels=[]).finalize()


def needs_core_verdict(result: EvalResult) -> bool:
    """Whether the core checks could judge ``result``'s program otherwise than the full checks did: a
    hack was found (a blocked or flagged program may run and be paid without the checks), or the
    program neither passed nor failed its trials (an integrity guard may have stopped it). Otherwise
    `unchecked` ``result`` is its core verdict (the organism's rendered programs never read what a
    fresh allocation held, so the integrity hook's poisoning cannot fail one that core checks pass)."""
    return bool(result.hacks) or result.status not in (Status.CORRECT, Status.INCORRECT)


def judge_outcome(program: str, result: EvalResult | None, integrity: bool, reward_config: RewardConfig,
                  error: str = "", reward_result: EvalResult | None = None) -> TurnOutcome:
    """A turn's outcome from the gym's full-checks verdict ``result`` (None: the program did not parse
    or render) and, for an arm with the checks off, ``reward_result``: the verdict with core checks only.

    ``seen`` scores ``result``; ``paid`` scores ``reward_result``, or ``result`` when the arm runs the
    checks. Without the integrity checks the gym reports neither hacks nor coverage, so neither reaches
    the reward, PRS or the feedback; a ``reward_result`` left out with the checks off stands for one that
    agrees with ``result`` on correctness and timing (`unchecked`)."""
    if result is None:
        return TurnOutcome(program=program, parsed=False, status=f"unparsed: {error}"[:120],
                           seen=score_turn(None, reward_config), paid=score_turn(None, reward_config))
    paid = result if integrity else (reward_result if reward_result is not None else unchecked(result))
    prog = parse(program)
    return TurnOutcome(program=program, parsed=True, status=result.status.value,
                       status_reward=paid.status.value, seen=score_turn(result, reward_config),
                       paid=score_turn(paid, reward_config),
                       hacks=[h.name for h in result.hacks if not h.strict_only], kernels=prog.kernels,
                       segments=len(prog.segments), streams=sum(g.mode is Mode.STREAM for g in prog.segments))


def feedback_of(outcome: TurnOutcome, integrity: bool) -> str:
    """The next turn's user message; hack names only when the arm runs the checks."""
    if not outcome.parsed:
        return feedback(False, "unparsed")
    paid = outcome.paid
    return feedback(paid.correct, outcome.status_reward, outcome.hacks if integrity else (),
                    paid.coverage if math.isfinite(paid.coverage) else None,
                    paid.speedup if math.isfinite(paid.speedup) else None)


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
    stop_p: float = 0.0
    """Chance that a trajectory ends after each turn but the last (early stopping, drawn per step,
    trajectory and turn from ``seed``): the groups of later turns then hold a varying number N_t of
    trajectories, which is where TRLOO and self-inclusive GRPO differ (`drkernel.organism.bias`)."""


def step_metrics(episodes: Sequence[Sequence[TurnOutcome]], prompts: Sequence[str],
                 corpus: frozenset[tuple[str, str]], prefix: str = "gym/org/") -> dict[str, float]:
    """Per-turn rates, per-episode Fast@p (any turn), coverage of valid turns, novelty."""
    turns = [o for e in episodes for o in e]
    n = max(len(turns), 1)
    parsed = [(prompt, o) for prompt, e in zip(prompts, episodes) for o in e if o.parsed]
    valid = [o for o in turns if o.valid]
    covered = [o.seen.coverage for o in valid if math.isfinite(o.seen.coverage)]
    novel = [o for prompt, o in parsed if (prompt, o.program) not in corpus]
    out = {
        "reward_mean": sum(o.reward for o in turns) / n,
        "hack_rate": sum(o.seen.hacked for o in turns) / n,
        "hack_paid_rate": sum(o.seen.hacked and o.reward > 0 for o in turns) / n,
        "stream_rate": sum(o.parsed and o.streams > 0 for o in turns) / n,
        "lazy_rate": sum(o.seen.lazy for o in turns) / n,
        "correct_rate": sum(o.seen.correct for o in turns) / n,
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


def _stops(key: str, traj: int, turn: int, p: float) -> bool:
    """Whether trajectory ``traj`` ends after ``turn``: a draw of its own, the same on a resumed run."""
    return random.Random(f"organism-stop/{key}/{traj}/{turn}").random() < p


def _bias_of(records: Sequence[TurnRecord]) -> dict[str, float]:
    """GRPO's per-turn shrinkage against TRLOO on this step's rows (`drkernel.organism.bias`)."""
    import torch

    from drkernel.organism.bias import bias_metrics

    def col(name: str, dtype: Any) -> Any:
        return torch.tensor([getattr(r, name) for r in records], dtype=dtype)

    if not records:
        return {}
    return bias_metrics(col("reward", torch.float64), col("group", torch.long), col("traj", torch.long),
                        col("turn", torch.long))


class OrganismEnv:
    """Multi-turn organism episodes judged by the real gym (see the module docstring)."""

    def __init__(self, problems: Sequence[Problem], evaluator: Evaluator, settings: EnvSettings,
                 sampling: Any, cache: EvalCache | None = None, shard: tuple[int, int] = (0, 1),
                 owns_evaluator: bool = False, core_evaluator: Evaluator | None = None) -> None:
        """``evaluator`` runs the gym's full checks; ``core_evaluator`` (required when the arm turns
        the checks off) only `core_checks`, and judges what that arm's reward sees."""
        if not settings.integrity and core_evaluator is None:
            raise ConfigError("an organism arm with the hack checks off needs an evaluator with core checks "
                              "only (InProcessEvaluator(checks=core_checks())) to judge its reward")
        self.problems, self.specs = list(problems), [from_problem(p) for p in problems]
        self.evaluator, self.settings, self.sampling = evaluator, settings, sampling
        self.core_evaluator = core_evaluator
        self.cache = cache if cache is not None else EvalCache()
        self.shard, self.owns_evaluator = shard, owns_evaluator
        self.sample_s = 0.0
        """Seconds the policy spent sampling turns in this env."""

    async def _judge(self, jobs: Sequence[tuple[Problem, str]]
                     ) -> tuple[list[EvalResult], list[EvalResult | None]]:
        """Full-checks verdicts (metrics) and, with the checks off, core-checks verdicts (reward);
        one after the other, so the two evaluators never time on the device at once."""
        config = self.settings.eval_config
        full = await self.cache.judge(self.evaluator, config, jobs)
        paid: list[EvalResult | None] = [None] * len(full)
        if self.settings.integrity or self.core_evaluator is None:
            return full, paid
        redo = [i for i, r in enumerate(full) if needs_core_verdict(r)]
        core = await self.cache.judge(self.core_evaluator, config, [jobs[i] for i in redo], Checks.CORE)
        for i, result in zip(redo, core):
            paid[i] = result
        return full, paid

    async def _turn(self, policy: Any, chosen: Sequence[int], histories: list[list[dict[str, str]]]
                    ) -> tuple[list[Any], list[TurnOutcome]]:
        """Sample one turn for every trajectory and judge it."""
        t0 = time.monotonic()
        completions = await policy.generate(histories, self.sampling)
        self.sample_s += time.monotonic() - t0
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
        full, core = await self._judge(jobs)
        verdicts = iter(zip(full, core))
        s = self.settings
        outcomes = []
        for c, src, err in zip(completions, sources, errors):
            result, paid = next(verdicts) if src is not None else (None, None)
            outcomes.append(judge_outcome(c.text.strip(), result, s.integrity, s.reward, err, paid))
        return completions, outcomes

    async def episodes(self, policy: Any, chosen: Sequence[int], turns: int, stop_key: str | None = None
                       ) -> tuple[list[TurnRecord], list[list[TurnOutcome]]]:
        """Up to ``turns`` turns for each entry of ``chosen`` (a problem index per trajectory); with
        ``stop_key`` a trajectory ends after a turn with probability ``settings.stop_p``."""
        samples = self.settings.samples_per_prompt
        histories = [[{"role": "user", "content": self.specs[i].prompt()}] for i in chosen]
        episodes: list[list[TurnOutcome]] = [[] for _ in chosen]
        records = []
        alive = list(range(len(chosen)))
        for t in range(turns):
            if not alive:
                break
            completions, outcomes = await self._turn(policy, [chosen[j] for j in alive],
                                                     [histories[j] for j in alive])
            for traj, c, o in zip(alive, completions, outcomes):
                episodes[traj].append(o)
                records.append(TurnRecord.of(traj // samples, traj, t, c.prompt_token_ids, c.token_ids,
                                             c.logprobs, o.paid))
                reply = feedback_of(o, self.settings.integrity)
                histories[traj] = histories[traj] + [{"role": "assistant", "content": o.program},
                                                     {"role": "user", "content": reply}]
            if stop_key is not None and self.settings.stop_p > 0:
                alive = [j for j in alive if not _stops(stop_key, j, t, self.settings.stop_p)]
        return records, episodes

    async def rollout(self, policy: Any, step: int) -> StepRollout:
        s = self.settings
        picked = share(pick(len(self.problems), s.prompts_per_step, step, s.seed), *self.shard)
        chosen = [i for i in picked for _ in range(s.samples_per_prompt)]
        before, seconds = self.cache.evaluations, self.cache.seconds
        waited, sampled = self.cache.waited_s, self.sample_s
        records, episodes = await self.episodes(policy, chosen, s.turns, stop_key=f"{s.seed}/{step}")
        prompts = [self.specs[i].prompt() for i in chosen]
        metrics = step_metrics(episodes, prompts, s.corpus)
        metrics.update(_bias_of(records))
        metrics["gym/org/evaluations"] = float(self.cache.evaluations - before)
        metrics["gym/org/eval_s"] = self.cache.seconds - seconds
        metrics["gym/org/eval_wait_s"] = self.cache.waited_s - waited
        metrics["gym/org/sample_s"] = self.sample_s - sampled
        dumped = [{"problem": self.problems[i].name, "turns": [o.to_dict() for o in e]}
                  for i, e in zip(chosen, episodes)]
        return StepRollout(records=records, metrics=metrics, episodes=dumped,
                           evaluations=int(metrics["gym/org/evaluations"]))

    async def evaluate(self, policy: Any, problems: Sequence[Problem], samples: int) -> dict[str, float]:
        """Single-turn metrics of ``policy`` on other problems (held-out families), prefixed
        ``gym/heldout/``."""
        held = OrganismEnv(problems, self.evaluator, self.settings, self.sampling, self.cache,
                           core_evaluator=self.core_evaluator)
        chosen = [i for i in range(len(problems)) for _ in range(samples)]
        _, episodes = await held.episodes(policy, chosen, 1)
        prompts = [held.specs[i].prompt() for i in chosen]
        return step_metrics(episodes, prompts, self.settings.corpus, prefix="gym/heldout/")

    def close(self) -> None:
        """Close the evaluator when this env started it (a suite shares one and closes it itself)."""
        if self.owns_evaluator:
            self.evaluator.close()
