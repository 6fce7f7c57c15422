"""The multi-turn kernel agent as a verl agent loop (``agent_name: drkernel_kernel_agent``).

One trajectory: generate -> extract the kernel -> evaluate it on the KernelGym service -> feedback
as the next user message -> next turn, for up to ``turns`` answers (docs/METHOD.md section 6). The
answers and feedback stay in one verl row (``response_mask`` 1 on answers, 0 on feedback); the
per-turn rewards and profiling values go to ``extra_fields`` under the keys of
`drkernel.rl.integrations.verl.algorithms`, where the ``trloo`` estimator and the PRS hook read
them, and their sum is the trajectory's ``reward_score``.

Prompt, feedback and extraction are the agent's own (`drkernel.agent`). One difference from
`drkernel.agent.episode`: earlier answers stay in the context exactly as generated (verl trains on
one continuous token sequence, so ``<think>`` text cannot be stripped from them).

Settings come from verl's rollout config: ``actor_rollout_ref.rollout.multi_turn.max_assistant_turns``
(turns, default 3) and from ``$DRKERNEL_GYM_URL`` / ``$DRKERNEL_GYM_TOKEN`` (the service).
"""

from __future__ import annotations

import logging
import os
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from drkernel.agent.prompts import PromptTemplates
from drkernel.rl.integrations.verl.algorithms import (
    TURN_CORRECT,
    TURN_COVERAGE,
    TURN_HACKED,
    TURN_REWARDS,
    TURN_SPEEDUP,
    HookConfig,
)
from drkernel.rl.integrations.verl.dataset import AGENT_NAME
from drkernel.rl.integrations.verl.reward import (
    TOKEN_ENV,
    ScoredTurn,
    eval_config_of,
    problem_of,
    score_response,
    service_url,
)
from drkernel.service.client import AsyncServiceClient

log = logging.getLogger(__name__)
DEFAULT_TURNS = 3


def turn_fields(turns: list[ScoredTurn]) -> dict[str, list[float]]:
    """The per-turn lists our loop writes to ``extra_fields``."""
    return {
        TURN_REWARDS: [t.score.reward for t in turns],
        TURN_CORRECT: [float(t.score.correct) for t in turns],
        TURN_HACKED: [float(t.score.hacked) for t in turns],
        TURN_COVERAGE: [t.score.coverage for t in turns],
        TURN_SPEEDUP: [t.score.speedup for t in turns],
    }


@register(AGENT_NAME)
class KernelAgentLoop(AgentLoopBase):
    """generate -> extract -> evaluate (service) -> feedback -> next turn."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        multi_turn = self.rollout_config.get("multi_turn", {}) or {}
        self.turns = int(multi_turn.get("max_assistant_turns") or DEFAULT_TURNS)
        self.response_length = self.rollout_config.response_length
        self.templates = PromptTemplates.default()
        self.reward = HookConfig.from_env().reward  # the same reward (and weights) as every other path

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = dict(kwargs.get("extra_info") or {})
        problem = problem_of(kwargs.get("reward_model", {}).get("ground_truth", ""), extra_info)
        config = eval_config_of(extra_info)
        messages = [dict(m) for m in kwargs["raw_prompt"]]
        prompt_ids = await self.ct_build_initial_tokens(messages)
        runtime_ids, response_mask, logprobs = list(prompt_ids), [], None
        turns: list[ScoredTurn] = []
        metrics: dict[str, Any] = {}
        async with AsyncServiceClient(service_url(extra_info), os.environ.get(TOKEN_ENV)) as client:
            for index in range(self.turns):
                out = await self.server_manager.generate(
                    request_id=uuid4().hex, prompt_ids=runtime_ids, sampling_params=sampling_params
                )
                if out.log_probs and logprobs is None:
                    logprobs = []  # verl aligns rollout log-probs only onto an existing list
                merged, response_mask, logprobs = await self.ct_merge_assistant_token(
                    runtime_ids,
                    out.token_ids,
                    response_mask,
                    logprobs,
                    assistant_logprobs=out.log_probs or None,
                )
                runtime_ids = merged.token_ids
                text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                turn = await score_response(
                    problem,
                    text,
                    config,
                    f"{problem.key}/{uuid4().hex[:8]}/t{index}",
                    client.evaluate,
                    self.reward,
                )
                turns.append(turn)
                if index + 1 == self.turns or len(response_mask) >= self.response_length:
                    break
                before = messages + [{"role": "assistant", "content": text}]
                messages = before + [self.templates.feedback_message(turn.feedback, turn.instruction)]
                merged, response_mask, logprobs = await self.ct_merge_context_msg(
                    before, messages, runtime_ids, response_mask, logprobs
                )
                if len(response_mask) >= self.response_length:
                    break
                runtime_ids = merged.token_ids
        n = len(response_mask)
        prompt_part = runtime_ids[: len(runtime_ids) - n]
        return AgentLoopOutput(
            prompt_ids=prompt_part,
            response_ids=runtime_ids[len(prompt_part) :][: self.response_length],
            response_mask=response_mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=sum(t.score.reward for t in turns),
            num_turns=2 * len(turns) + 1,
            metrics=metrics,
            extra_fields={**turn_fields(turns), "turn_scores": [t.score.reward for t in turns], "tool_rewards": []},
        )
