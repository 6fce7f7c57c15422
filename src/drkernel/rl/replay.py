"""Replay given answers as if the policy model had sampled them (teacher forcing).

``TeacherForcedPolicy`` takes the texts of another policy (e.g. the scripted built-in gold / lazy /
broken solutions), tokenizes them with the trainer's tokenizer and scores them with the trainer's
model: token ids plus log_softmax(logits / temperature) of each token, the numbers a sampling
rollout would have returned. It drives the kernel task end to end with a model too small or too
untrained to write kernels itself (smoke tests, GPU pipeline checks), with real gym rewards.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from drkernel.agent.policies.base import Completion, Message, Policy, SamplingParams
from drkernel.rl.envs import RolloutEnv, StepRollout
from drkernel.rl.logprobs import completion_logprobs
from drkernel.rl.rows import TurnRecord, collate


class TeacherForcedPolicy:
    """``source``'s answers with token ids and ``model``'s log-probs of them."""

    name = "teacher-forced"

    def __init__(self, source: Policy, model: Any, tokenizer: Any) -> None:
        self.source, self.model, self.tokenizer = source, model, tokenizer

    def _score(self, messages: Sequence[Message], text: str, temperature: float) -> Completion:
        chat = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        prompt = self.tokenizer(chat, add_special_tokens=False)["input_ids"]
        tokens = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        record = TurnRecord(
            group=0,
            traj=0,
            turn=0,
            prompt_ids=tuple(prompt),
            completion_ids=tuple(tokens),
            rollout_logprobs=(0.0,) * len(tokens),
            reward=0.0,
        )
        device = next(self.model.parameters()).device
        rows = collate([record], self.tokenizer.pad_token_id).to(device)
        with torch.no_grad():
            logp = completion_logprobs(self.model, rows, temperature)[0, -len(tokens) :]  # (n,)
        return Completion(
            text=text,
            token_ids=tokens,
            prompt_token_ids=prompt,
            logprobs=logp.tolist(),
            usage={"prompt_tokens": len(prompt), "completion_tokens": len(tokens)},
        )

    async def generate(self, batch: Sequence[Sequence[Message]], params: SamplingParams) -> list[Completion]:
        texts = await self.source.generate(batch, params)
        temperature = params.temperature or 1.0
        return [
            c if c.finish_reason == "error" else self._score(m, c.text, temperature)
            for m, c in zip(batch, texts)
        ]

    async def aclose(self) -> None:
        await self.source.aclose()


class ReplayEnv:
    """The kernel task's env (`drkernel.tasks.kernel.KernelEnv`: a `RolloutEnv` with ``problems``) with
    the built-in solution files as its answers, teacher-forced through the trainer's model. Each problem gets two scripts, ``gold -> lazy`` and ``broken -> gold``, taken
    round-robin by its samples, so rewards differ within every (prompt, turn) group."""

    def __init__(self, inner: RolloutEnv, model: Any, tokenizer: Any) -> None:
        from drkernel.agent.policies.scripted import ScriptedPolicy, builtin_script

        self.inner = inner
        script = ScriptedPolicy.for_problems(
            [
                (p, [builtin_script(p, ["gold", "lazy"]), builtin_script(p, ["broken", "gold"])])
                for p in inner.problems  # type: ignore[attr-defined]
            ]
        )
        self.policy = TeacherForcedPolicy(script, model, tokenizer)

    async def rollout(self, policy: Policy, step: int) -> StepRollout:
        del policy  # the replayed answers stand in for the trainer's samples
        return await self.inner.rollout(self.policy, step)

    def close(self) -> None:
        self.inner.close()
