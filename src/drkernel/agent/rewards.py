"""Per-turn reward of an evaluated turn (REFERENCE.md section 5).

r = 0.5 * 1[correct] + 0.5 * min(speedup, 3) + 0.5 * time_coverage * 1[correct], and 0 for a hacked,
failed, timed-out or unparseable turn. Without timing (CPU mode) the speedup term is 0; without
profiling the coverage term is 0.
"""

from __future__ import annotations

import math

from drkernel.gym.result import EvalResult

CORRECT_WEIGHT = 0.5
SPEEDUP_WEIGHT = 0.5
SPEEDUP_CAP = 3.0
COVERAGE_WEIGHT = 0.5


def _finite(x: float | None) -> float:
    return 0.0 if x is None or not math.isfinite(x) else float(x)


def turn_reward(result: EvalResult | None) -> float:
    """The profiling-based reward of one turn; ``None`` (no code to evaluate) scores 0."""
    if result is None or not result.correct or result.hacked:
        return 0.0
    speedup = min(_finite(result.speedup), SPEEDUP_CAP)
    return CORRECT_WEIGHT + SPEEDUP_WEIGHT * speedup + COVERAGE_WEIGHT * _finite(result.time_coverage)
