"""What the gym must say about each solution of the built-in suite, by label (its filename prefix).

``EXPECTATIONS`` is the one table mapping a label to the verdict its solutions must get from
``drkernel.gym`` (lenient mode, the default); ``test_builtin_suite.py`` evaluates every solution
and checks its ``EvalResult`` with ``violations``.
"""

from __future__ import annotations

import dataclasses

from drkernel.gym import EvalConfig, EvalResult, Status
from drkernel.gym.verdict.checks import LAZY_THRESHOLD

COVERAGE_FLOOR = EvalConfig().coverage_floor
"""Below it, the lenient verdict calls a solution a passthrough (hack 2)."""
FULL_COVERAGE = 0.9
"""Solutions that do all the compute in Triton must reach this op coverage."""


@dataclasses.dataclass(frozen=True)
class Expectation:
    """The verdict a solution with a given label must get.

    valid: valid in the lenient verdict (compiled, correct, no hack) or, when False, not correct.
    no_hacks: not even a strict-only hack (no PyTorch compute in ``forward`` at all).
    coverage: the half-open range [low, high) its op coverage must fall in (None: not checked).
    lazy_warning: a lazy-optimization warning must be given.
    """

    valid: bool
    no_hacks: bool = False
    coverage: tuple[float, float] | None = None
    lazy_warning: bool = False


EXPECTATIONS: dict[str, Expectation] = {
    "gold": Expectation(valid=True, no_hacks=True, coverage=(FULL_COVERAGE, float("inf"))),
    "lazy": Expectation(valid=True, coverage=(COVERAGE_FLOOR, LAZY_THRESHOLD), lazy_warning=True),
    "slow": Expectation(valid=True, coverage=(FULL_COVERAGE, float("inf"))),
    "broken": Expectation(valid=False),
}


def violations(label: str, result: EvalResult) -> list[str]:
    """How ``result`` departs from what ``EXPECTATIONS[label]`` asks; empty when it complies."""
    expect = EXPECTATIONS[label]
    if not expect.valid:
        return [] if result.status is not Status.CORRECT else ["correct, wanted anything but correct"]
    found = []
    if not result.valid:
        found.append(f"not valid: status {result.status.value}")
    if expect.no_hacks and result.hacks:
        found.append("flagged")
    if expect.coverage is not None:
        low, high = expect.coverage
        if result.op_coverage is None or not low <= result.op_coverage < high:
            found.append(f"op coverage {result.op_coverage}, wanted in [{low}, {high})")
    if expect.lazy_warning and not any("lazy" in w for w in result.warnings):
        found.append("no lazy-optimization warning")
    return found
