"""Turn-level training rows (paper Sec. 6: "each turn is one training row").

A row is one turn: its prompt tokens (the chat so far, generation prompt included) followed by the
tokens the policy sampled, with the rollout engine's log-prob of each sampled token. Only the
completion tokens are in the loss. :func:`collate` packs rows into left-padded tensors, the same
padding side as batched generation, so every row's completion ends at the last column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import torch

from drkernel.errors import ConfigError
from drkernel.reward import TurnScore

if TYPE_CHECKING:
    from drkernel.agent.episode import Episode


@dataclass(frozen=True)
class TurnRecord:
    """One turn of one trajectory, as the trainer needs it."""

    group: int
    """Prompt index within the step (trajectories of the same prompt form the groups)."""
    traj: int
    """Trajectory index within the step."""
    turn: int
    """Turn index t within the trajectory (0-based)."""
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    rollout_logprobs: tuple[float, ...]
    """Rollout engine's log_softmax(logits / temperature) at each completion token."""
    reward: float
    correct: bool = False
    hacked: bool = False
    coverage: float = math.nan
    """Time coverage when profiled on a GPU, else op coverage; NaN when neither was measured."""
    speedup: float = math.nan
    """NaN when not timed."""

    @classmethod
    def of(cls, group: int, traj: int, turn: int, prompt_ids: Sequence[int], completion_ids: Sequence[int],
           rollout_logprobs: Sequence[float], score: TurnScore) -> "TurnRecord":
        """The row of a scored turn: its reward and PRS inputs are the `TurnScore`'s."""
        return cls(group=group, traj=traj, turn=turn, prompt_ids=tuple(prompt_ids),
                   completion_ids=tuple(completion_ids), rollout_logprobs=tuple(rollout_logprobs),
                   reward=score.reward, correct=score.correct, hacked=score.hacked,
                   coverage=score.coverage, speedup=score.speedup)

    def __post_init__(self) -> None:
        if len(self.completion_ids) != len(self.rollout_logprobs):
            raise ValueError(
                f"TurnRecord: {len(self.completion_ids)} completion tokens but "
                f"{len(self.rollout_logprobs)} rollout log-probs"
            )


def records_from_episodes(episodes: Sequence["Episode"], samples_per_prompt: int) -> list[TurnRecord]:
    """Turn records of a step's episodes, listed in (problem, sample) order.

    Group = problem (consecutive blocks of ``samples_per_prompt`` episodes), trajectory = episode.
    Each row reads the turn's `TurnScore` (``Turn.score``): the reward is the one scored by
    `drkernel.reward.score_turn` when the turn was evaluated, so the number trained on is the number
    logged in ``episodes.jsonl``; the PRS coverage is the reward's own (time coverage, else op coverage).

    Turns whose request failed (``finish_reason == "error"``) carry no tokens and are left out.

    Raises:
        ConfigError: a turn carries no token ids or log-probs (the rollout policy does not return them).
    """
    records = []
    for traj, episode in enumerate(episodes):
        for turn in episode.turns:
            if turn.finish_reason == "error":
                continue  # the request failed: no tokens to train on (the episode stopped here)
            if turn.token_ids is None or turn.prompt_token_ids is None or turn.logprobs is None:
                raise ConfigError(
                    f"episode {episode.id} turn {turn.index} has no token ids or log-probs: "
                    "the rollout policy must return them to train (openai: token_ids=true)"
                )
            records.append(
                TurnRecord.of(traj // samples_per_prompt, traj, turn.index, turn.prompt_token_ids,
                              turn.token_ids, turn.logprobs, turn.score)
            )
    return records


@dataclass
class Rows:
    """A batch of R rows as tensors. L = longest prompt + completion, C = longest completion.

    Left padding: row i's tokens occupy the last ``seq_len[i]`` columns of ``input_ids``; its
    completion occupies the last ``completion_len[i]`` of them, so completion token j of every row
    sits at column ``L - C + j`` of the C-column views, right-aligned as well.
    """

    input_ids: torch.Tensor
    """[R, L] long; padding holds ``pad_id``."""
    attention_mask: torch.Tensor
    """[R, L] long; 1 on real tokens."""
    completion_mask: torch.Tensor
    """[R, C] bool; True on completion tokens (right-aligned)."""
    completion_ids: torch.Tensor
    """[R, C] long; the sampled tokens, right-aligned (padding: ``pad_id``)."""
    rollout_logprobs: torch.Tensor
    """[R, C] float32; 0 on padding."""
    group: torch.Tensor
    """[R] long."""
    traj: torch.Tensor
    """[R] long."""
    turn: torch.Tensor
    """[R] long."""
    reward: torch.Tensor
    """[R] float32."""
    correct: torch.Tensor
    """[R] bool."""
    hacked: torch.Tensor
    """[R] bool."""
    coverage: torch.Tensor
    """[R] float32, NaN = not measured."""
    speedup: torch.Tensor
    """[R] float32, NaN = not timed."""

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, index: torch.Tensor) -> "Rows":
        """The rows at ``index`` ([k] long), padding columns trimmed."""
        sub = Rows(**{name: value[index] for name, value in vars(self).items()})
        width = int(sub.attention_mask.sum(dim=1).max().item()) if len(sub) else 0
        cwidth = int(sub.completion_mask.sum(dim=1).max().item()) if len(sub) else 0
        sub.input_ids, sub.attention_mask = sub.input_ids[:, -width:], sub.attention_mask[:, -width:]
        sub.completion_mask, sub.completion_ids = (
            sub.completion_mask[:, -cwidth:],
            sub.completion_ids[:, -cwidth:],
        )
        sub.rollout_logprobs = sub.rollout_logprobs[:, -cwidth:]
        return sub

    def to(self, device: torch.device | str) -> "Rows":
        return Rows(**{name: value.to(device) for name, value in vars(self).items()})


def collate(records: Sequence[TurnRecord], pad_id: int) -> Rows:
    """Pack records into left-padded :class:`Rows`. Records without completion tokens are allowed
    (an empty answer): they keep their place in the groups and contribute no loss token."""
    if not records:
        raise ValueError("collate: no records")
    seqs = [list(r.prompt_ids) + list(r.completion_ids) for r in records]
    width = max(len(s) for s in seqs)
    cwidth = max(1, max(len(r.completion_ids) for r in records))
    input_ids = torch.full((len(records), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(records), width), dtype=torch.long)
    comp_ids = torch.full((len(records), cwidth), pad_id, dtype=torch.long)
    comp_mask = torch.zeros((len(records), cwidth), dtype=torch.bool)
    logprobs = torch.zeros((len(records), cwidth), dtype=torch.float32)
    for i, (r, s) in enumerate(zip(records, seqs)):
        input_ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
        attention[i, width - len(s) :] = 1
        n = len(r.completion_ids)
        if n:
            comp_ids[i, cwidth - n :] = torch.tensor(r.completion_ids, dtype=torch.long)
            comp_mask[i, cwidth - n :] = True
            logprobs[i, cwidth - n :] = torch.tensor(r.rollout_logprobs, dtype=torch.float32)

    def column(name: str, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([getattr(r, name) for r in records], dtype=dtype)

    return Rows(
        input_ids=input_ids,
        attention_mask=attention,
        completion_mask=comp_mask,
        completion_ids=comp_ids,
        rollout_logprobs=logprobs,
        group=column("group", torch.long),
        traj=column("traj", torch.long),
        turn=column("turn", torch.long),
        reward=column("reward", torch.float32),
        correct=column("correct", torch.bool),
        hacked=column("hacked", torch.bool),
        coverage=column("coverage", torch.float32),
        speedup=column("speedup", torch.float32),
    )
