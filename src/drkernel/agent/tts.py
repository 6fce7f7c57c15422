"""Sequential test-time scaling (docs/METHOD.md section 6).

Iteration 0 runs ``first_turns`` turns with the episode's history mode (all turns by default). Every later iteration keeps the initial
prompt plus the contiguous window of ``window`` earlier turns with the highest total score (reward,
speedup or coverage; or simply the last ``window`` turns) and runs one more turn. With the paper's
setting (5 turns, 10 iterations counting iteration 0, window 4) an episode has 5 + 9 = 14 turns, and
every prompt after iteration 0 holds 4 earlier turns. The best turn overall gives the "best" numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drkernel.errors import ConfigError
from drkernel.reward import reward_coverage

if TYPE_CHECKING:
    from drkernel.agent.episode import Turn

SELECT_BY = ("reward", "speedup", "coverage", "last")


@dataclass(frozen=True)
class TTSConfig:
    """Sequential test-time scaling settings."""

    first_turns: int = 5
    """Turns of iteration 0 (full history)."""
    iterations: int = 10
    """Iterations, counting iteration 0; each later one adds one turn."""
    window: int = 4
    """Earlier turns kept in the prompt after iteration 0."""
    select: str = "reward"
    """Window score: ``reward``, ``speedup``, ``coverage`` (summed over the window) or ``last``."""

    def __post_init__(self) -> None:
        bad = []
        if self.first_turns < 1:
            bad.append(f"first_turns={self.first_turns} (>= 1)")
        if self.iterations < 1:
            bad.append(f"iterations={self.iterations} (>= 1)")
        if self.window < 1:
            bad.append(f"window={self.window} (>= 1)")
        if self.select not in SELECT_BY:
            bad.append(f"select={self.select!r} (one of {SELECT_BY})")
        if bad:
            raise ConfigError("invalid TTSConfig: " + "; ".join(bad))

    @property
    def total_turns(self) -> int:
        return self.first_turns + self.iterations - 1

    @classmethod
    def parse(cls, spec: str) -> TTSConfig:
        """``"first=5,iterations=10,window=4,select=reward"`` (any subset; ``turns`` = ``first``)."""
        names = {
            "first": "first_turns",
            "turns": "first_turns",
            "first_turns": "first_turns",
            "iterations": "iterations",
            "window": "window",
            "select": "select",
        }
        values: dict[str, object] = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            key, sep, value = part.partition("=")
            if not sep or key not in names:
                raise ConfigError(f"--tts {spec!r}: expected key=value with keys {sorted(names)}")
            values[names[key]] = value if names[key] == "select" else int(value)
        return cls(**values)


def turn_score(turn: Turn, by: str) -> float:
    """A turn's score for window selection: its reward (the one the episode scored with
    `drkernel.reward`, the number training and the bench use), or the speedup / coverage of a valid
    turn (0 otherwise; the reward's coverage: time coverage, else op coverage)."""
    if by == "reward":
        return turn.reward
    r = turn.result
    if r is None or not r.valid:
        return 0.0
    if by == "speedup":
        return r.speedup or 0.0
    return reward_coverage(r) or 0.0


def select_window(turns: Sequence[Turn], window: int, by: str) -> list[int]:
    """Indices of the contiguous ``window`` turns with the highest total score (the latest wins a
    tie), or the last ``window`` turns for ``by="last"``."""
    n = len(turns)
    if n <= window:
        return list(range(n))
    if by == "last":
        return list(range(n - window, n))
    scores = [turn_score(t, by) for t in turns]
    best_start = max(range(n - window + 1), key=lambda s: (sum(scores[s : s + window]), s))
    return list(range(best_start, best_start + window))
