"""The per-turn score (paper Sec. 5): one definition of what a turn earned and what became of it, read
by the agent (``Turn.reward``), the bench, test-time scaling, drkernel's trainer, the organism and verl's
reward function.

`score_turn(result, config)` is the one place a gym verdict becomes a `TurnScore`: the reward under
``config.shape``, the verdict's flags (correct, hacked, valid, lazy), the coverage the reward pays for,
the speedup and the turn's `Outcome`. A consumer reads the score; it never re-derives a field.

Notation, for one evaluated turn:
    c   = 1[correct]            h = 1[hacked]            s = speedup (t_reference / t_solution)
    cov = time coverage when the gym profiled the turn on a GPU, else op coverage (CPU mode)

``profiling`` (the paper's, PR):
    r = 1[c and not h] * (w_correct + w_speedup * min(s, cap) + w_cov * cov)
with w_correct = w_speedup = w_cov = 0.5 and cap = 3, so r is in [0, 2.5].
``tiered`` (a peer's shape): hacked -1, no compile -0.5, incorrect -0.3, else by speedup tier.

A speedup or coverage that was not measured (None or NaN: CPU mode times nothing) contributes 0; in
a `TurnScore` it is NaN (`measured`, the one None/NaN rule). A turn with no result (no code to
evaluate, a failed request) scores 0 under either shape. A turn is lazy when it is valid and the gym
gave it the lazy-optimization warning: the gym's one threshold (`gym/verdict/checks.py`,
``LAZY_THRESHOLD``) decides, no consumer keeps another.

Plain Python floats, no torch: the bench and the agent import this without loading torch.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from drkernel.errors import ConfigError
from drkernel.gym.result import EvalResult, Status
from drkernel.gym.verdict.hacks import LAZY_WARNING

NAN = float("nan")
LAZY_TAG = LAZY_WARNING.partition(":")[0]
"""How the gym's lazy-optimization warning starts (``lazy_optimization``)."""


class RewardShape(str, enum.Enum):
    """Which reward function scores a turn."""

    PROFILING = "profiling"
    TIERED = "tiered"


@dataclass(frozen=True)
class TieredRewardConfig:
    """A peer's tiered reward shape, kept as a configurable alternative (Sec. 5)."""

    tiers: tuple[tuple[float, float], ...] = ((3.0, 1.0), (2.0, 0.8), (1.5, 0.6), (1.2, 0.4), (1.0, 0.2))
    """(minimum speedup, reward) pairs for correct turns, highest threshold first."""
    slow: float = 0.0
    """Correct but below every tier (or not timed)."""
    incorrect: float = -0.3
    """Compiled but wrong."""
    no_compile: float = -0.5
    """Did not compile (or did not load)."""
    hacked: float = -1.0
    """Flagged as a reward hack, whatever else it did."""

    def __post_init__(self) -> None:
        thresholds = [t for t, _ in self.tiers]
        if thresholds != sorted(thresholds, reverse=True):
            raise ConfigError(
                f"TieredRewardConfig.tiers must be ordered by threshold, highest first: {self.tiers}"
            )


@dataclass(frozen=True)
class RewardConfig:
    """The reward of a turn: its shape and weights; defaults are the paper's."""

    shape: RewardShape = RewardShape.PROFILING
    """``profiling`` (the paper's profiling-based reward) or ``tiered``."""
    correct_weight: float = 0.5
    """``profiling``: paid for a correct, non-hacked turn."""
    speedup_weight: float = 0.5
    """``profiling``: multiplies the capped speedup."""
    speedup_cap: float = 3.0
    """``profiling``: speedups above this count as this."""
    coverage_weight: float = 0.5
    """``profiling``: w_cov, multiplies the coverage of a correct turn (0 turns PR off)."""
    tiered: TieredRewardConfig = field(default_factory=TieredRewardConfig)
    """``tiered``: the tiers and penalties."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", RewardShape(self.shape))  # a YAML string or the enum
        if self.speedup_cap <= 0:
            raise ConfigError(f"invalid RewardConfig: speedup_cap={self.speedup_cap} (> 0)")


def measured(x: float | None) -> float:
    """A measure as a float, NaN when it was not taken (None, NaN or infinite): the one None/NaN rule."""
    return NAN if x is None or not math.isfinite(x) else float(x)


def _or_zero(x: float | None) -> float:
    """0 for a measure that was not taken: what it contributes to a reward."""
    value = measured(x)
    return 0.0 if math.isnan(value) else value


def profiling_reward(
    correct: bool, speedup: float | None, coverage: float | None, hacked: bool, config: RewardConfig = RewardConfig()
) -> float:
    """r = 1[correct and not hacked] * (w_correct + w_speedup * min(speedup, cap) + w_cov * coverage)."""
    if not correct or hacked:
        return 0.0
    speed = min(_or_zero(speedup), config.speedup_cap)
    return config.correct_weight + config.speedup_weight * speed + config.coverage_weight * _or_zero(coverage)


def tiered_reward(
    compiled: bool, correct: bool, speedup: float | None, hacked: bool, config: TieredRewardConfig = TieredRewardConfig()
) -> float:
    """Hacked -1, no compile -0.5, incorrect -0.3; a correct turn gets its highest tier's reward
    (1.0 / 0.8 / 0.6 / 0.4 / 0.2 for speedup >= 3 / 2 / 1.5 / 1.2 / 1), else ``slow``."""
    if hacked:
        return config.hacked
    if not compiled:
        return config.no_compile
    if not correct:
        return config.incorrect
    speed = _or_zero(speedup)
    return next((value for threshold, value in config.tiers if speed >= threshold), config.slow)


def reward_coverage(result: EvalResult) -> float | None:
    """The coverage the reward pays for: time coverage when profiled on a GPU, else op coverage."""
    return result.time_coverage if result.time_coverage is not None else result.op_coverage


def turn_reward(result: EvalResult | None, config: RewardConfig = RewardConfig()) -> float:
    """The reward of one evaluated turn; ``None`` (no code to evaluate) scores 0.

    A turn on a degenerate problem (the judge found a trivial answer, zeros, a constant or an input,
    within the reference's own tolerance: `EvalResult.degenerate`) scores 0 unless hacked: its verdict
    cannot tell work from no work, so neither is paid."""
    if result is None:
        return 0.0
    if result.degenerate and not result.hacked:
        return 0.0
    if config.shape is RewardShape.TIERED:
        return tiered_reward(bool(result.compiled), bool(result.correct), result.speedup, result.hacked, config.tiered)
    return profiling_reward(bool(result.correct), result.speedup, reward_coverage(result), result.hacked, config)


class _Label(str, enum.Enum):
    """A str enum that prints as its value (``str`` and f-strings), as a plain label would."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


Outcome = _Label(  # type: ignore[call-overload]  # members built from `Status`: the two cannot drift apart
    "Outcome",
    [("POLICY_ERROR", "policy_error"), ("UNPARSEABLE", "unparseable"), ("HACKED", "hacked")]
    + [(s.name, s.value) for s in Status],
    module=__name__,
)
Outcome.__doc__ = """What became of a turn: ``policy_error`` (the request failed), ``unparseable`` (no code to
evaluate), ``hacked`` (a hack counted by the verdict mode), else the gym's `Status` (``correct``, ...)."""


@dataclass(frozen=True)
class TurnScore:
    """One turn, scored: everything the agent, bench, trainer, organism and verl read about it.

    Unmeasured numbers are NaN. ``valid`` is derived (correct and not hacked, as `EvalResult.valid`).
    """

    reward: float = 0.0
    """The reward under the config's shape (`turn_reward`)."""
    correct: bool = False
    hacked: bool = False
    """A hack counted by the request's verdict mode (`EvalResult.hacked`)."""
    lazy: bool = False
    """Valid, with the gym's lazy-optimization warning."""
    coverage: float = NAN
    """The coverage the reward pays for (`reward_coverage`); NaN when neither was measured (None or an
    infinite value given here is stored as NaN, as is ``speedup``)."""
    speedup: float = NAN
    """NaN when not timed."""
    outcome: Outcome = Outcome.UNPARSEABLE

    def __post_init__(self) -> None:
        object.__setattr__(self, "coverage", measured(self.coverage))  # None or inf: NaN
        object.__setattr__(self, "speedup", measured(self.speedup))
        object.__setattr__(self, "outcome", Outcome(self.outcome))  # a stored label or the enum

    @property
    def valid(self) -> bool:
        return self.correct and not self.hacked


def outcome_of(result: EvalResult | None, policy_error: bool = False) -> Outcome:
    """``policy_error``, ``unparseable`` (no result), ``hacked``, or the gym status."""
    if policy_error:
        return Outcome.POLICY_ERROR
    if result is None:
        return Outcome.UNPARSEABLE
    return Outcome.HACKED if result.hacked else Outcome(result.status.value)


def is_lazy(result: EvalResult) -> bool:
    """Valid with the gym's lazy-optimization warning (the gym's threshold decides)."""
    return bool(result.valid) and any(w.startswith(LAZY_TAG) for w in result.warnings)


def score_turn(result: EvalResult | None, config: RewardConfig = RewardConfig(), *,
               policy_error: bool = False) -> TurnScore:
    """The score of one turn from its verdict (None: no code was evaluated)."""
    return scored_as(result, turn_reward(result, config), outcome_of(result, policy_error))


def scored_as(result: EvalResult | None, reward: float, outcome: Outcome | str) -> TurnScore:
    """The score of a turn whose reward and outcome were recorded when it was scored (a turn read back
    from JSON); every other field comes from the verdict, as in `score_turn`."""
    if result is None:
        return TurnScore(reward=float(reward), outcome=outcome)
    return TurnScore(reward=float(reward), correct=bool(result.correct), hacked=bool(result.hacked),
                     lazy=is_lazy(result), coverage=reward_coverage(result), speedup=result.speedup,
                     outcome=outcome)
