"""verl reward function: score a response by evaluating its kernel on the KernelGym service.

``custom_reward_function.path=<this file> custom_reward_function.name=compute_score`` makes verl call
`compute_score` for every trajectory. Trajectories from our agent loop were evaluated turn by turn
while they ran, so their score is read back from the loop's record (no second evaluation); any
other response (a single-turn rollout) is extracted, evaluated on the service named by
``extra_info["gym_url"]`` or ``$DRKERNEL_GYM_URL`` and scored with the paper's reward
(`drkernel.reward.turn_reward` with the hook config's ``reward`` section, docs/METHOD.md section 5):
the same function, and the same weights, as drkernel's own trainer and the bench.

Dataset rows (`drkernel.rl.integrations.verl.dataset`) carry the problem in ``extra_info["problem"]``
(a `Problem` dict) and the reference source as ``ground_truth``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping

from drkernel.agent.extract import extract_code
from drkernel.agent.feedback import extraction_feedback, result_feedback, truncate
from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.result import EvalResult
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig, reward_coverage, turn_reward
from drkernel.rl.integrations.verl.algorithms import TURN_CORRECT, TURN_REWARDS, HookConfig

URL_ENV = "DRKERNEL_GYM_URL"
TOKEN_ENV = "DRKERNEL_GYM_TOKEN"
NAN = float("nan")


@dataclass(frozen=True)
class ScoredTurn:
    """One answer, evaluated: its reward, the PRS inputs, and the feedback text for the next turn."""

    reward: float
    correct: bool
    hacked: bool
    coverage: float
    speedup: float
    outcome: str
    feedback: str
    instruction: str

    def extra(self) -> dict[str, float | str]:
        """Per-response values for verl's ``reward_extra_info`` (floats, so every row has all keys)."""
        return {
            "correct": float(self.correct),
            "hacked": float(self.hacked),
            "coverage": self.coverage,
            "speedup": self.speedup,
            "outcome": self.outcome,
        }


def _num(x: float | None) -> float:
    return NAN if x is None or not math.isfinite(x) else float(x)


def scored(
    result: EvalResult | None, feedback: str, instruction: str, outcome: str, reward: RewardConfig
) -> ScoredTurn:
    correct = bool(result is not None and result.correct)
    hacked = bool(result is not None and result.hacked)
    return ScoredTurn(
        reward=turn_reward(result, reward),
        correct=correct,
        hacked=hacked,
        coverage=_num(reward_coverage(result)) if result else NAN,
        speedup=_num(result.speedup) if result else NAN,
        outcome=outcome,
        feedback=feedback,
        instruction=instruction,
    )


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
        return scored(None, truncate(feedback, feedback_max_chars), instruction, "unparseable", reward)
    result = await evaluate(
        EvalRequest(problem=problem, solution=extraction.code, config=config, request_id=request_id)
    )
    feedback, instruction = result_feedback(result)
    outcome = "hacked" if result.hacked else result.status.value
    return scored(result, truncate(feedback, feedback_max_chars), instruction, outcome, reward)


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
    return {"score": turn.reward, **turn.extra()}
