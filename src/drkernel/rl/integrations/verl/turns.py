"""verl's multi-turn layout -> Dr. Kernel's turn-level rows, and back.

verl keeps a whole multi-turn trajectory in one row: ``responses`` [B, T] holds every answer and
every feedback message after the prompt, ``response_mask`` [B, T] is 1 on the model's own tokens.
Dr. Kernel's algorithms (`drkernel.rl`) work on turn-level rows, one per answer. A turn is a maximal
run of 1s in ``response_mask`` (feedback messages always separate two answers). Its *span* reaches
from its first token to the first token of the next turn, so a reward written anywhere after an
answer (verl writes a scalar reward on the last valid token) belongs to that answer.

Notation: B trajectories, T response tokens, R turn rows (sum over trajectories of their turns).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch


@dataclass(frozen=True)
class TurnLayout:
    """Where the turns of a batch are.

    Attributes:
        traj_id: [R] long, the row of ``responses`` each turn belongs to.
        turn: [R] long, the turn's index within its trajectory (0, 1, ...).
        row_of_token: [B, T] long, the turn row of each model token, -1 elsewhere.
        span_of_token: [B, T] long, the turn row whose span holds the token, -1 before the first turn.
        last_token: [R] long, the position of each turn's last token.
    """

    traj_id: torch.Tensor
    turn: torch.Tensor
    row_of_token: torch.Tensor
    span_of_token: torch.Tensor
    last_token: torch.Tensor

    @property
    def num_rows(self) -> int:
        return int(self.traj_id.numel())

    def turns_per_trajectory(self, batch: int) -> torch.Tensor:
        """[B] long, number of turns in each trajectory."""
        return torch.bincount(self.traj_id, minlength=batch)

    def token_mask(self, keep: torch.Tensor) -> torch.Tensor:
        """[B, T] bool: the model tokens of the turn rows where ``keep`` [R] bool is True."""
        counted = self.row_of_token >= 0
        return counted & keep[self.row_of_token.clamp(min=0)]

    def broadcast(self, values: torch.Tensor) -> torch.Tensor:
        """[R] values -> [B, T]: each model token gets its turn's value, other tokens 0."""
        out = values[self.row_of_token.clamp(min=0)]
        return torch.where(self.row_of_token >= 0, out, torch.zeros_like(out))

    def rows_view(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A [B, T] per-token tensor as [R, T] turn rows: ``(values, mask)``, mask True on the row's
        own tokens (for functions of `drkernel.rl` that take one row per turn)."""
        positions = torch.arange(self.num_rows, device=tokens.device).unsqueeze(-1)  # (R, 1)
        mask = self.row_of_token[self.traj_id] == positions  # (R, T)
        return tokens[self.traj_id], mask


def turn_layout(response_mask: torch.Tensor) -> TurnLayout:
    """The turns of a [B, T] 0/1 ``response_mask``."""
    mask = response_mask.bool()
    starts = mask.clone()
    starts[:, 1:] &= ~mask[:, :-1]  # (B, T) True where a run of model tokens begins
    turn_of_start = starts.long().cumsum(dim=-1) - 1  # (B, T) index of the latest turn so far, -1 before
    per_traj = starts.sum(dim=-1)  # (B,)
    first_row = per_traj.cumsum(0) - per_traj  # (B,) row number of each trajectory's turn 0
    traj_id = torch.repeat_interleave(torch.arange(mask.shape[0], device=mask.device), per_traj)  # (R,)
    turn = torch.arange(traj_id.numel(), device=mask.device) - first_row[traj_id]  # (R,)
    span = torch.where(turn_of_start >= 0, first_row.unsqueeze(-1) + turn_of_start, -1)  # (B, T)
    row = torch.where(mask, span, -1)  # (B, T)
    positions = torch.arange(mask.shape[1], device=mask.device).expand_as(row)
    last = torch.full((traj_id.numel(),), -1, dtype=torch.long, device=mask.device)
    last = last.scatter_reduce(0, row[mask], positions[mask], reduce="amax")  # (R,)
    return TurnLayout(traj_id=traj_id, turn=turn, row_of_token=row, span_of_token=span, last_token=last)


def turn_rewards(token_level_rewards: torch.Tensor, layout: TurnLayout) -> torch.Tensor:
    """[R] reward of each turn: the sum of ``token_level_rewards`` [B, T] over the turn's span."""
    in_span = layout.span_of_token >= 0
    out = torch.zeros(layout.num_rows, dtype=token_level_rewards.dtype, device=token_level_rewards.device)
    return out.index_add(0, layout.span_of_token[in_span], token_level_rewards[in_span])


def per_turn_values(
    values: Sequence[Sequence[float] | None], layout: TurnLayout, batch: int, fill: float = float("nan")
) -> torch.Tensor:
    """[R] float from per-trajectory lists (one value per turn, as the agent loop records them).

    A trajectory whose last turns were cut off by the response length has fewer turns in the batch
    than values: the extra values are ignored. A missing list (``None``) fills its turns with ``fill``.
    """
    counts = layout.turns_per_trajectory(batch).tolist()
    flat: list[float] = []
    for b, n in enumerate(counts):
        given = list(values[b]) if values[b] is not None else []
        if len(given) < n:
            given += [fill] * (n - len(given))
        flat += [float(v) for v in given[:n]]
    return torch.tensor(flat, dtype=torch.float32, device=layout.traj_id.device)


def place_turn_rewards(layout: TurnLayout, rewards: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """[B, T] float: each turn's reward (from [R] ``rewards``) on the turn's last token, 0 elsewhere."""
    out = torch.zeros(shape, dtype=torch.float32, device=rewards.device)
    out[layout.traj_id, layout.last_token] = rewards.float()
    return out
