"""verl reward function: score a response by evaluating its kernel on the KernelGym service.

``custom_reward_function.path=<this file> custom_reward_function.name=compute_score`` makes verl call
`compute_score` for every trajectory. Trajectories from our agent loop were evaluated turn by turn
while they ran, so their score is read back from the loop's record (no second evaluation); any
other response (a single-turn rollout) is extracted, evaluated on the service named by
``extra_info["gym_url"]`` or ``$DRKERNEL_GYM_URL`` and scored with the paper's reward
(`drkernel.reward.score_turn` with the hook config's ``reward`` section, docs/METHOD.md section 5):
the same function, and the same weights, as drkernel's own trainer and the bench.

Dataset rows (`drkernel.rl.integrations.verl.dataset`) carry the problem in ``extra_info["problem"]``
(a `Problem` dict) and the reference source as ``ground_truth``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from drkernel.agent.extract import extract_code
from drkernel.agent.feedback import extraction_feedback, result_feedback, truncate
from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.result import EvalResult
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig, TurnScore, score_turn
from drkernel.rl.integrations.verl.algorithms import TURN_CORRECT, TURN_REWARDS, HookConfig

URL_ENV = "DRKERNEL_GYM_URL"
TOKEN_ENV = "DRKERNEL_GYM_TOKEN"


@dataclass(frozen=True)
class ScoredTurn:
    """One answer, evaluated: its `TurnScore` (reward, PRS inputs) and the feedback for the next turn."""

    score: TurnScore
    feedback: str
    instruction: str

    def extra(self) -> dict[str, float | str]:
        """Per-response values for verl's ``reward_extra_info`` (floats, so every row has all keys)."""
        s = self.score
        return {
            "correct": float(s.correct),
            "hacked": float(s.hacked),
            "coverage": s.coverage,
            "speedup": s.speedup,
            "outcome": s.outcome.value,
        }


async def score_response(
    problem: Problem,
    text: str,
    config: EvalConfig,
    request_id: str,
    evaluate: Callable[[EvalRequest], Awaitable[EvalResult]],
    reward: RewardConfig = RewardConfig(),
    feedback_max_chars: int = 2000,
) -> ScoredTurn:
    """Extract the kernel from ``text``, evaluate it with ``evaluate``, and score it with ``reward``."""
    extraction = extract_code(text)
    if not extraction.ok:
        feedback, instruction = extraction_feedback(extraction)
        return ScoredTurn(score_turn(None, reward), truncate(feedback, feedback_max_chars), instruction)
    result = await evaluate(
        EvalRequest(problem=problem, solution=extraction.code, config=config, request_id=request_id)
    )
    feedback, instruction = result_feedback(result)
    return ScoredTurn(score_turn(result, reward), truncate(feedback, feedback_max_chars), instruction)


def _mapping(value: Any) -> Mapping[str, Any]:
    """A dict, or a dict stored as a JSON string (as `drkernel.rl.integrations.verl.dataset` writes it)."""
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def eval_config_of(extra_info: Mapping[str, Any]) -> EvalConfig:
    return EvalConfig.from_dict(_mapping(extra_info.get("eval_config")))


def problem_of(ground_truth: str, extra_info: Mapping[str, Any]) -> Problem:
    """The problem of a dataset row: ``extra_info["problem"]`` or, failing that, the reference source."""
    if "problem" in extra_info:
        return Problem.from_dict(_mapping(extra_info["problem"]))
    if not ground_truth:
        raise ConfigError("a drkernel verl row needs extra_info['problem'] or the reference as ground_truth")
    return Problem(
        name=str(extra_info.get("name", "problem")),
        level=int(extra_info.get("level", 1)),
        code=ground_truth,
        source="rows",
    )


def service_url(extra_info: Mapping[str, Any]) -> str:
    url = extra_info.get("gym_url") or os.environ.get(URL_ENV)
    if not url:
        raise ConfigError(f"no KernelGym service: set ${URL_ENV} or extra_info['gym_url']")
    return str(url)


def _from_agent_loop(extra_info: Mapping[str, Any]) -> dict[str, Any] | None:
    rewards = extra_info.get(TURN_REWARDS)
    if rewards is None:
        return None
    correct = list(extra_info.get(TURN_CORRECT) or [])
    return {
        "score": float(sum(rewards)),
        "turns": float(len(rewards)),
        "correct": float(bool(correct) and bool(correct[-1])),
        "best_turn_reward": float(max(rewards, default=0.0)),
    }


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl's custom reward function: ``{"score": reward, ...extra values logged by verl}``."""
    import asyncio

    from drkernel.service.client import AsyncServiceClient

    extra_info = dict(extra_info or {})
    recorded = _from_agent_loop(extra_info)
    if recorded is not None:
        return recorded
    problem = problem_of(ground_truth, extra_info)
    config = eval_config_of(extra_info)
    url, token = service_url(extra_info), os.environ.get(TOKEN_ENV)

    async def run() -> ScoredTurn:
        async with AsyncServiceClient(url, token) as client:
            return await score_response(
                problem,
                solution_str,
                config,
                f"{data_source}/{problem.key}",
                client.evaluate,
                HookConfig.from_env().reward,
            )

    turn = asyncio.run(run())
    return {"score": turn.score.reward, **turn.extra()}
