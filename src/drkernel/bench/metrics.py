"""Benchmark metrics (docs/METHOD.md section 2), as pure functions over per-sample turn scores
(`drkernel.reward.TurnScore`: the episode's own score of each turn, nothing re-derived here).

Notation: a *sample* is one episode; its turns are t = 1..T. A turn counts for Fast@p when it is
correct, not hacked (``valid``) and, for p > 0, its speedup is >= p.

- Per-turn Fast@p at turn t: over ALL samples, the fraction whose turn t counts. A sample that
  stopped before turn t (early stop, policy error) carries its last turn forward.
- Best-by-turn Fast@p at turn t: per sample the best speedup among its valid turns 1..t (a sample
  with no valid turn scores nothing), then the fraction with best >= p (p = 0: any valid turn).
- Fast@p for p > 0 is None ("not measured") when no valid turn carries a speedup (NaN in the score),
  i.e. the gym ran without timing (CPU mode).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drkernel.reward import TurnScore

if TYPE_CHECKING:
    from drkernel.agent.episode import Episode

PS: tuple[float, ...] = (0.0, 1.0, 1.2, 1.5, 2.0, 3.0)


@dataclass(frozen=True)
class SampleRecord:
    """One sample (episode): its problem and its turns in order."""

    problem_key: str
    level: int
    turns: tuple[TurnScore, ...]


def p_key(p: float) -> str:
    return f"fast@{p:g}"


def turn_at(sample: SampleRecord, t: int) -> TurnScore | None:
    """Turn t (1-based), or the sample's last turn when it stopped earlier; None without turns."""
    if not sample.turns:
        return None
    return sample.turns[min(t, len(sample.turns)) - 1]


def counts(turn: TurnScore | None, p: float) -> bool:
    if turn is None or not turn.valid:
        return False
    return p == 0 or turn.speedup >= p  # NaN (not timed) is below every p


def timing_measured(samples: Iterable[SampleRecord]) -> bool:
    return any(t.valid and math.isfinite(t.speedup) for s in samples for t in s.turns)


def fast_at_p(turns: Sequence[TurnScore | None], p: float) -> float:
    """Fraction of ``turns`` (one per sample) that are valid with speedup >= p."""
    return sum(counts(t, p) for t in turns) / len(turns) if turns else 0.0


def best_turn(sample: SampleRecord, t: int) -> TurnScore | None:
    """The valid turn among 1..t with the highest speedup (untimed counts as 0), None if none is valid."""
    valid = [x for x in sample.turns[:t] if x.valid]
    return max(valid, key=lambda x: x.speedup if math.isfinite(x.speedup) else 0.0) if valid else None


def _fast_table(
    turns: Sequence[TurnScore | None], timed: bool, ps: Sequence[float]
) -> dict[str, float | None]:
    return {p_key(p): (fast_at_p(turns, p) if p == 0 or timed else None) for p in ps}


def _rate(turns: Sequence[TurnScore | None], attr: str) -> float:
    return sum(bool(t is not None and getattr(t, attr)) for t in turns) / len(turns) if turns else 0.0


def turn_summary(
    samples: Sequence[SampleRecord], t: int, timed: bool, ps: Sequence[float] = PS
) -> dict[str, Any]:
    """Per-turn metrics at turn t (1-based)."""
    turns = [turn_at(s, t) for s in samples]
    outcomes = Counter(x.outcome.value if x is not None else "no_turn" for x in turns)
    rewards = [x.reward for x in turns if x is not None]
    return {
        "turn": t,
        **_fast_table(turns, timed, ps),
        "correct": _rate(turns, "correct"),
        "valid": _rate(turns, "valid"),
        "hacked": _rate(turns, "hacked"),
        "lazy": _rate(turns, "lazy"),
        "mean_reward": sum(rewards) / len(rewards) if rewards else 0.0,
        "outcomes": dict(sorted(outcomes.items())),
        # of the "correct" outcomes, how many were lazy: the outcomes plot shows them apart
        "lazy_correct": sum(1 for x in turns if x is not None and x.outcome == "correct" and x.lazy),
    }


def best_summary(
    samples: Sequence[SampleRecord], t: int, timed: bool, ps: Sequence[float] = PS
) -> dict[str, Any]:
    """Best-by-turn metrics over turns 1..t."""
    return {"turn": t, **_fast_table([best_turn(s, t) for s in samples], timed, ps)}


def summarize(
    samples: Sequence[SampleRecord], ps: Sequence[float] = PS, by_level: bool = True
) -> dict[str, Any]:
    """Everything the report shows: per-turn and best-by-turn tables, rates, per-level breakdown."""
    timed = timing_measured(samples)
    n_turns = max((len(s.turns) for s in samples), default=0)
    out: dict[str, Any] = {
        "samples": len(samples),
        "problems": len({s.problem_key for s in samples}),
        "timed": timed,
        "turns": n_turns,
        "per_turn": [turn_summary(samples, t, timed, ps) for t in range(1, n_turns + 1)],
        "best_by_turn": [best_summary(samples, t, timed, ps) for t in range(1, n_turns + 1)],
        "speedups": sorted(x.speedup for s in samples for x in s.turns if x.valid and math.isfinite(x.speedup)),
    }
    if by_level:
        groups: dict[int, list[SampleRecord]] = defaultdict(list)
        for s in samples:
            groups[s.level].append(s)
        out["levels"] = {
            str(level): summarize(group, ps, by_level=False) for level, group in sorted(groups.items())
        }
    return out


def records_from_episodes(episodes: Iterable[Episode]) -> list[SampleRecord]:
    """Metric records of finished episodes: each turn's own score (``Turn.score``)."""
    return [SampleRecord(problem_key=ep.problem.key, level=ep.problem.level,
                         turns=tuple(t.score for t in ep.turns)) for ep in episodes]
