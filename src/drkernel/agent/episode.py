"""Multi-turn episodes: prompt -> policy -> extract code -> gym -> feedback -> next turn.

``await run_episodes(problems, policy, evaluator, EpisodeConfig(...))`` runs ``samples`` episodes per
problem concurrently and returns them in (problem, sample) order. The RL trainer uses the same call
for rollouts: every `Turn` holds the prompt messages it was generated from, the response, token ids
and rollout log-probs (when the policy gives them), the extracted code, the `EvalResult` and the
reward.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from drkernel.agent.extract import extract_code, strip_thinking
from drkernel.agent.feedback import extraction_feedback, result_feedback, truncate
from drkernel.agent.policies.base import Message, Policy, SamplingParams
from drkernel.agent.prompts import PromptTemplates
from drkernel.agent.tts import TTSConfig, select_window
from drkernel.errors import ConfigError
from drkernel.gym.config import LANGUAGES, EvalConfig, EvalRequest
from drkernel.gym.protocol import Evaluator
from drkernel.gym.result import EvalResult
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig, TurnScore, score_turn, scored_as

log = logging.getLogger(__name__)

HISTORY_MODES = ("all", "last")
EARLY_STOP = ("never", "valid", "speedup")


@dataclass(frozen=True)
class EpisodeConfig:
    """How episodes run."""

    turns: int = 3
    """Turns per episode (ignored when ``tts`` is set: it decides the count)."""
    history: str = "all"
    """Earlier turns in each prompt: ``all`` or ``last`` (the last ``history_k``)."""
    history_k: int = 1
    """Turns kept by ``history="last"``."""
    strip_thinking: bool = True
    """Drop ``<think>`` text from earlier answers when they go back into a prompt."""
    early_stop: str = "never"
    """Stop an episode early: ``never``, ``valid`` (after a valid turn), ``speedup`` (valid and
    speedup >= ``early_stop_speedup``)."""
    early_stop_speedup: float = 1.0
    """Threshold for ``early_stop="speedup"``."""
    feedback_max_chars: int = 2000
    """Feedback text is cut to this length."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """How each turn is scored (`drkernel.reward`: the one reward the bench, TTS and training share)."""
    sampling: SamplingParams = field(default_factory=SamplingParams)
    """Sampling parameters of every turn."""
    eval_config: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation settings sent with every request."""
    language: str = "triton"
    """What the policy is asked to write and each request says it is: ``triton`` or ``cuda``."""
    tts: TTSConfig | None = None
    """Sequential test-time scaling; None for plain multi-turn episodes."""
    concurrency: int = 64
    """Episodes in flight at once."""

    def __post_init__(self) -> None:
        bad = []
        if self.turns < 1:
            bad.append(f"turns={self.turns} (>= 1)")
        if self.history not in HISTORY_MODES:
            bad.append(f"history={self.history!r} (one of {HISTORY_MODES})")
        if self.history_k < 1:
            bad.append(f"history_k={self.history_k} (>= 1)")
        if self.early_stop not in EARLY_STOP:
            bad.append(f"early_stop={self.early_stop!r} (one of {EARLY_STOP})")
        if self.tts is not None and self.early_stop != "never":
            bad.append(
                f"early_stop={self.early_stop!r} conflicts with tts (test-time scaling runs every turn)"
            )
        if self.concurrency < 1:
            bad.append(f"concurrency={self.concurrency} (>= 1)")
        if self.language not in LANGUAGES:
            bad.append(f"language={self.language!r} (one of {LANGUAGES})")
        if bad:
            raise ConfigError("invalid EpisodeConfig: " + "; ".join(bad))

    @property
    def total_turns(self) -> int:
        return self.tts.total_turns if self.tts else self.turns


@dataclass
class Turn:
    """One answer and its evaluation. ``messages`` is the prompt the answer was generated from;
    ``context`` the indices of the earlier turns in it; ``feedback`` the user message that follows.
    ``outcome`` and ``reward`` are the turn's `TurnScore` as stored (``score`` reads the rest off
    ``result``)."""

    index: int
    context: list[int]
    messages: list[Message]
    response: str
    finish_reason: str = "stop"
    token_ids: list[int] | None = None
    prompt_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    code: str | None = None
    extraction: str = "none"
    outcome: str = ""
    result: EvalResult | None = None
    reward: float = 0.0
    feedback: str = ""
    gen_s: float = 0.0
    eval_s: float = 0.0

    @property
    def score(self) -> TurnScore:
        """The turn's score (`drkernel.reward.score_turn`), from its stored reward and outcome."""
        return scored_as(self.result, self.reward, self.outcome)

    @property
    def valid(self) -> bool:
        return bool(self.result is not None and self.result.valid)

    @property
    def speedup(self) -> float | None:
        return self.result.speedup if self.result is not None else None

    def to_dict(self, tokens: bool = True) -> dict[str, Any]:
        d = {k: v for k, v in vars(self).items() if k != "result"}
        d["result"] = self.result.to_dict() if self.result is not None else None
        if not tokens:
            d.update(token_ids=None, prompt_token_ids=None, logprobs=None)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Turn:
        d = dict(d)
        d["result"] = EvalResult.from_dict(d["result"]) if d.get("result") else None
        return cls(**d)


@dataclass
class Episode:
    """A problem, one sample's turns, and why it stopped."""

    problem: Problem
    sample: int
    prompt: list[Message]
    turns: list[Turn] = field(default_factory=list)
    stop_reason: str = ""

    @property
    def id(self) -> str:
        return episode_id(self.problem, self.sample)

    def conversation(self) -> list[Message]:
        """The whole dialogue as chat messages (SFT format): prompt, then each answer and the
        feedback on it, ending with the last answer."""
        msgs = [dict(m) for m in self.prompt]
        for i, t in enumerate(self.turns):
            msgs.append({"role": "assistant", "content": t.response})
            if i + 1 < len(self.turns):
                msgs.append({"role": "user", "content": t.feedback})
        return msgs

    def best_turn(self) -> Turn | None:
        """The valid turn with the highest reward (the earliest on ties), None when none is valid."""
        valid = [t for t in self.turns if t.valid]
        return max(valid, key=lambda t: (t.reward, -t.index)) if valid else None

    def to_dict(self, tokens: bool = True) -> dict[str, Any]:
        return {
            "id": self.id,
            "problem": self.problem.to_dict(),
            "sample": self.sample,
            "prompt": self.prompt,
            "stop_reason": self.stop_reason,
            "turns": [t.to_dict(tokens) for t in self.turns],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Episode:
        return cls(
            problem=Problem.from_dict(d["problem"]),
            sample=int(d["sample"]),
            prompt=list(d["prompt"]),
            turns=[Turn.from_dict(t) for t in d["turns"]],
            stop_reason=d.get("stop_reason", ""),
        )


def episode_id(problem: Problem, sample: int) -> str:
    return f"{problem.key}#{sample}"


def context_for(index: int, turns: Sequence[Turn], config: EpisodeConfig) -> list[int]:
    """Which earlier turns go into turn ``index``'s prompt."""
    if config.tts is not None and index >= config.tts.first_turns:
        return select_window(turns, config.tts.window, config.tts.select)
    earlier = list(range(index))
    return earlier[-config.history_k :] if config.history == "last" else earlier


def build_messages(
    prompt: Sequence[Message], turns: Sequence[Turn], context: Sequence[int], strip: bool = True
) -> list[Message]:
    msgs = [dict(m) for m in prompt]
    for i in context:
        answer = strip_thinking(turns[i].response).strip() if strip else turns[i].response
        msgs.append({"role": "assistant", "content": answer})
        msgs.append({"role": "user", "content": turns[i].feedback})
    return msgs


def _should_stop(turn: Turn, config: EpisodeConfig) -> str | None:
    if turn.outcome == "policy_error":
        return "policy_error"
    if config.early_stop == "valid" and turn.valid:
        return "early_stop"
    if config.early_stop == "speedup" and turn.valid and (turn.speedup or 0.0) >= config.early_stop_speedup:
        return "early_stop"
    return None


class EpisodeRunner:
    """Runs episodes of one configuration against one policy and one evaluator."""

    def __init__(
        self,
        policy: Policy,
        evaluator: Evaluator,
        config: EpisodeConfig,
        templates: PromptTemplates | None = None,
    ) -> None:
        self.policy, self.evaluator, self.config = policy, evaluator, config
        self.templates = templates or PromptTemplates.default(config.language)

    async def _evaluate(self, problem: Problem, code: str, request_id: str) -> EvalResult:
        req = EvalRequest(
            problem=problem, solution=code, config=self.config.eval_config, request_id=request_id,
            language=self.config.language,
        )
        (result,) = await self.evaluator.evaluate_batch([req])
        return result

    async def step(self, episode: Episode) -> Turn:
        """Generate, extract, evaluate and write feedback for the episode's next turn."""
        index = len(episode.turns)
        context = context_for(index, episode.turns, self.config)
        messages = build_messages(episode.prompt, episode.turns, context, self.config.strip_thinking)
        t0 = time.perf_counter()
        (completion,) = await self.policy.generate([messages], self.config.sampling)
        gen_s = time.perf_counter() - t0
        extraction = extract_code(completion.text)
        result, eval_s = None, 0.0
        if extraction.ok and completion.finish_reason != "error":
            t0 = time.perf_counter()
            result = await self._evaluate(episode.problem, extraction.code, f"{episode.id}/t{index}")
            eval_s = time.perf_counter() - t0
            feedback, instruction = result_feedback(result)
        elif completion.finish_reason == "error":
            feedback, instruction = f"The request failed: {completion.error}", "Answer again."
        else:
            feedback, instruction = extraction_feedback(extraction)
        if completion.finish_reason == "length":
            feedback += "\nYour answer was cut off at the token limit: be more concise."
        text = truncate(feedback, self.config.feedback_max_chars)
        score = score_turn(result, self.config.reward, policy_error=completion.finish_reason == "error")
        turn = Turn(
            index=index,
            context=context,
            messages=messages,
            response=completion.text,
            finish_reason=completion.finish_reason,
            token_ids=completion.token_ids,
            prompt_token_ids=completion.prompt_token_ids,
            logprobs=completion.logprobs,
            code=extraction.code,
            extraction=extraction.method,
            outcome=score.outcome.value,
            result=result,
            reward=score.reward,
            gen_s=gen_s,
            eval_s=eval_s,
            feedback=self.templates.feedback_message(text, instruction)["content"],
        )
        episode.turns.append(turn)
        return turn

    async def run(self, problem: Problem, sample: int) -> Episode:
        """One whole episode."""
        episode = Episode(
            problem=problem,
            sample=sample,
            prompt=self.templates.first_messages(problem, self.config.eval_config.tolerance),
        )
        for _ in range(self.config.total_turns):
            turn = await self.step(episode)
            stop = _should_stop(turn, self.config)
            if stop:
                episode.stop_reason = stop
                return episode
        episode.stop_reason = "max_turns"
        return episode


async def run_episodes(
    problems: Sequence[Problem],
    policy: Policy,
    evaluator: Evaluator,
    config: EpisodeConfig = EpisodeConfig(),
    samples: int = 1,
    templates: PromptTemplates | None = None,
    skip: Sequence[str] = (),
    on_episode: Callable[[Episode], Awaitable[None] | None] | None = None,
) -> list[Episode]:
    """Run ``samples`` episodes for every problem, at most ``config.concurrency`` at a time.

    ``skip`` holds episode ids (``"{problem.key}#{sample}"``) not to run (a resumed benchmark);
    ``on_episode`` is called as each episode finishes (to write it out, to advance a progress bar).
    Returns the episodes that ran, in (problem, sample) order.
    """
    runner = EpisodeRunner(policy, evaluator, config, templates)
    gate = asyncio.Semaphore(config.concurrency)
    skipped = set(skip)

    async def one(problem: Problem, sample: int) -> Episode:
        async with gate:
            episode = await runner.run(problem, sample)
        if on_episode is not None:
            maybe = on_episode(episode)
            if asyncio.iscoroutine(maybe):
                await maybe
        return episode

    jobs = [one(p, s) for p in problems for s in range(samples) if episode_id(p, s) not in skipped]
    return list(await asyncio.gather(*jobs))
