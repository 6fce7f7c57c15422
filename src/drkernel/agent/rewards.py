"""Per-turn reward of an evaluated turn (REFERENCE.md section 5), through `drkernel.rl.rewards`.

``profiling`` (the paper's): r = 0.5 * 1[correct] + 0.5 * min(speedup, 3) + 0.5 * time_coverage *
1[correct], and 0 for a hacked, failed or timed-out turn; without timing (CPU mode) the speedup term
is 0, without profiling the coverage term. ``tiered``: a peer's shape (hack -1, no compile -0.5,
incorrect -0.3, speedup tiers). An unparseable answer (no result) scores 0 under either shape.
The reward functions (and torch with them) are imported on first use, so a CLI that only reads
trajectories starts fast.
"""

from __future__ import annotations

from drkernel.gym.result import EvalResult

REWARD_SHAPES = ("profiling", "tiered")


def turn_reward(result: EvalResult | None, shape: str = "profiling") -> float:
    """The reward of one turn; ``None`` (no code to evaluate) scores 0."""
    if result is None:
        return 0.0
    from drkernel.rl.rewards import profiling_reward, tiered_reward  # torch: imported on first use only

    if shape == "tiered":
        return float(tiered_reward(result.compiled, result.correct, result.speedup, result.hacked))
    return float(profiling_reward(result.correct, result.speedup, result.time_coverage, result.hacked))
