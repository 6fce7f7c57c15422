"""The organism's claims, registered before any run: metric, arms, direction, test and level.

A claim "``high_arm`` above ``low_arm`` on ``metric``" is decided by the one-sided permutation test of
`drkernel.organism.stats` on per-seed values (each run's mean of ``metric`` over its last `TAIL`
steps), at level ``alpha``:

* SEPARATED: p <= alpha in the registered direction;
* REVERSED: p <= alpha in the opposite direction;
* NOT SEPARATED: neither;
* UNDECIDED: an arm has fewer than `MIN_SEEDS` seeds (the test is still computed and printed, but
  the registered protocol was not run);
* MISSING: an arm did not run.

`REGISTERED` holds the three claims the protocol decides; `EXPLORATORY` ones are tested the same way
and printed apart, never counted as findings. The tables are frozen here, in code, so a verdict
is never chosen after the numbers are seen; the report computes every verdict from the run files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Sequence

from drkernel.organism.stats import PermutationResult, permutation_test

TAIL = 3
"""A run's value of a metric: its mean over the last TAIL steps."""
MIN_SEEDS = 8
"""Seeds per arm the registered protocol asks for."""


class Verdict(str, Enum):
    SEPARATED = "SEPARATED"
    NOT_SEPARATED = "NOT SEPARATED"
    REVERSED = "REVERSED"
    UNDECIDED = "UNDECIDED"
    MISSING = "MISSING"


@dataclass(frozen=True)
class Claim:
    """"``high_arm`` above ``low_arm`` on ``metric``", tested one-sided at ``alpha``."""

    key: str
    text: str
    metric: str
    high_arm: str
    low_arm: str
    alpha: float = 0.05


REGISTERED: tuple[Claim, ...] = (
    Claim("hack", "without hack checks, hacks take over (hack rate: nocheck above full)", "hack_rate",
          "nocheck", "full"),
    Claim("lazy", "without PR/PRS, lazy optimisation settles in (lazy rate: nopr above full)", "lazy_rate",
          "nopr", "full"),
    Claim("fast", "fused kernels rise with the full method (Fast@1.2: full above nopr)", "fast1.2",
          "full", "nopr"),
)
EXPLORATORY: tuple[Claim, ...] = (
    Claim("coverage", "PR+PRS raise coverage (coverage: full above nopr)", "coverage", "full", "nopr"),
    Claim("trloo", "TRLOO beats GRPO on multi-turn (reward: full above grpo)", "reward_mean", "full", "grpo"),
)
CLAIM_ARMS = ("nocheck", "nopr", "full")
"""The arms the registered claims need."""


@dataclass(frozen=True)
class Decision:
    """A claim, its verdict, the test behind it and the per-seed values it read."""

    claim: Claim
    verdict: Verdict
    test: PermutationResult | None
    high: tuple[tuple[int, float], ...] = ()
    """(seed, value) of ``claim.high_arm``."""
    low: tuple[tuple[int, float], ...] = ()
    notes: tuple[str, ...] = field(default=())

    def line(self) -> str:
        """One line: verdict, p-value, means and ranges over seeds."""
        c = self.claim
        if self.test is None:
            return f"{c.text}: **{self.verdict.value}** ({'; '.join(self.notes)})"
        t = self.test
        return (f"{c.text}: **{self.verdict.value}** (one-sided permutation p = {t.p_value:.4f}, "
                f"reverse p = {t.p_reverse:.4f}, alpha {c.alpha}, {'exact' if t.exact else 'Monte Carlo'} "
                f"over {t.splits} splits; {c.high_arm} {_spread(self.high)} vs {c.low_arm} "
                f"{_spread(self.low)}, n = {len(self.high)} and {len(self.low)})")


def _spread(values: Sequence[tuple[int, float]]) -> str:
    xs = [v for _, v in values]
    return f"{sum(xs) / len(xs):.3f} [{min(xs):.3f}, {max(xs):.3f}]"


def decide(claim: Claim, per_seed: Mapping[str, Mapping[int, float]], min_seeds: int = MIN_SEEDS) -> Decision:
    """The claim's verdict from ``per_seed[arm][seed]`` (each run's value of ``claim.metric``).

    Seeds whose value is NaN (a run without the metric) are left out and named in the notes."""
    missing = [a for a in (claim.high_arm, claim.low_arm) if not per_seed.get(a)]
    if missing:
        return Decision(claim, Verdict.MISSING, None, notes=(f"no runs of {', '.join(missing)}",))
    notes = []
    sides = []
    for arm in (claim.high_arm, claim.low_arm):
        kept = tuple(sorted((s, v) for s, v in per_seed[arm].items() if math.isfinite(v)))
        if len(kept) < len(per_seed[arm]):
            notes.append(f"{arm}: {len(per_seed[arm]) - len(kept)} runs without {claim.metric}")
        sides.append(kept)
    high, low = sides
    if not high or not low:
        return Decision(claim, Verdict.MISSING, None, high, low, tuple(notes) + ("no finite values",))
    test = permutation_test([v for _, v in high], [v for _, v in low])
    if min(len(high), len(low)) < min_seeds:
        verdict = Verdict.UNDECIDED
        notes.append(f"fewer than {min_seeds} seeds per arm: the registered protocol was not run")
    elif test.p_value <= claim.alpha:
        verdict = Verdict.SEPARATED
    elif test.p_reverse <= claim.alpha:
        verdict = Verdict.REVERSED
    else:
        verdict = Verdict.NOT_SEPARATED
    return Decision(claim, verdict, test, high, low, tuple(notes))


def to_json(d: Decision) -> dict[str, Any]:
    c, t = d.claim, d.test
    return {"key": c.key, "claim": c.text, "metric": c.metric, "high_arm": c.high_arm, "low_arm": c.low_arm,
            "alpha": c.alpha, "verdict": d.verdict.value, "notes": list(d.notes),
            "p_value": t.p_value if t else None, "p_reverse": t.p_reverse if t else None,
            "difference": t.difference if t else None, "exact": t.exact if t else None,
            "splits": t.splits if t else None,
            "high": [{"seed": s, "value": v} for s, v in d.high],
            "low": [{"seed": s, "value": v} for s, v in d.low]}
