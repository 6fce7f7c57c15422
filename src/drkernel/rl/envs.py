"""What the trainer holds: a :class:`RolloutEnv`, and the learning-sanity task that needs no gym.

Every env implements :class:`RolloutEnv`: ``await env.rollout(policy, step)`` returns a
:class:`StepRollout` with the turn records to train on, metrics (``reward/``, ``gym/``), and a JSON-ready
record of every episode. The trainer does not care which one it holds. The kernel task
(`drkernel.tasks.kernel`) and the organism (`drkernel.organism.env`) live above this package and are
built by the composition root, `drkernel.tasks`. With ``shard=(rank, world_size)`` an env samples only
that rank's contiguous share of each step's prompts (data parallel, drkernel.rl.distributed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

import torch

from drkernel.agent.policies.base import Policy, SamplingParams
from drkernel.rl.distributed import share
from drkernel.rl.rows import TurnRecord


@dataclass
class StepRollout:
    """One step's trajectories."""

    records: list[TurnRecord]
    metrics: dict[str, float] = field(default_factory=dict)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    evaluations: int = 0
    """Gym evaluations run for this step."""


class RolloutEnv(Protocol):
    async def rollout(self, policy: Policy, step: int) -> StepRollout:
        """Sample this step's prompts and their trajectories with ``policy``."""
        ...

    def close(self) -> None: ...


def pick(n_items: int, count: int, step: int, seed: int) -> list[int]:
    """Indices of the ``count`` items used at ``step``: consecutive slices of a seeded permutation per
    epoch, so every item is used once per epoch and a resumed run picks the same ones."""
    out: list[int] = []
    position = step * count
    while len(out) < count:
        epoch, offset = divmod(position, n_items)
        order = torch.randperm(n_items, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
        take = min(count - len(out), n_items - offset)
        out += order[offset : offset + take].tolist()
        position += take
    return out


SANITY_PROMPTS = (
    "How many legs does a spider have?",
    "What is 12 times 7?",
    "Give the year the first transistor was built.",
    "How many bytes are in a kilobyte?",
    "What is the square of 9?",
    "Name a prime number above 50.",
    "How many threads are in a CUDA warp?",
    "What is 1000 minus 1?",
)


def format_reward(text: str, allowed: str) -> float:
    """Share of the answer's non-space characters that are in ``allowed``; 0 for an empty answer.

    With ``allowed = "0123456789"`` the required format is "digits only": 1 for "42", 0.5 for "4a".
    """
    chars = [c for c in text if not c.isspace()]
    return sum(c in allowed for c in chars) / len(chars) if chars else 0.0


class SanityEnv:
    """Learning sanity: single-turn answers rewarded for following a format (no gym).

    A random-init policy almost never answers in the format, but the reward is graded per
    character, so a working trainer raises it within a few dozen steps on a CPU.
    """

    def __init__(
        self,
        sampling: SamplingParams,
        prompts_per_step: int,
        samples_per_prompt: int,
        allowed: str,
        seed: int,
        prompts: Sequence[str] = SANITY_PROMPTS,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        self.sampling, self.prompts_per_step, self.samples = sampling, prompts_per_step, samples_per_prompt
        self.allowed, self.seed, self.prompts, self.shard = allowed, seed, list(prompts), shard

    async def rollout(self, policy: Policy, step: int) -> StepRollout:
        picked = pick(len(self.prompts), self.prompts_per_step, step, self.seed)
        chosen = [self.prompts[i] for i in share(picked, *self.shard)]
        batch = [[{"role": "user", "content": p}] for p in chosen for _ in range(self.samples)]
        completions = await policy.generate(batch, self.sampling)
        records, episodes = [], []
        for traj, (messages, c) in enumerate(zip(batch, completions)):
            if c.token_ids is None or c.prompt_token_ids is None or c.logprobs is None:
                from drkernel.errors import ConfigError

                raise ConfigError("the rollout policy returned no token ids or log-probs")
            reward = format_reward(c.text, self.allowed)
            records.append(
                TurnRecord(
                    group=traj // self.samples,
                    traj=traj,
                    turn=0,
                    prompt_ids=tuple(c.prompt_token_ids),
                    completion_ids=tuple(c.token_ids),
                    rollout_logprobs=tuple(c.logprobs),
                    reward=reward,
                    correct=reward == 1.0,
                )
            )
            episodes.append({"prompt": messages[0]["content"], "response": c.text, "reward": reward})
        exact = sum(r.reward == 1.0 for r in records) / len(records)
        return StepRollout(records=records, metrics={"reward/format_exact": exact}, episodes=episodes)

    def close(self) -> None:
        pass
