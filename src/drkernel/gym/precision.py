"""The baseline's declared precision, and the rule that both sides are timed at it (torch-free).

The reference is timed by the judge and the solution by its candidate; both pin the backend flags
below at start (`drkernel.gym.harness.inputs.pin_backend_flags`), whatever the process inherited,
so a speedup never compares an fp32 reference with a TF32 solution. The verdict checks the flags
each side reports against the declaration: a difference withholds the speedup and names the flag
(`mismatch`), so a result can never carry a speedup measured at two precisions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

BASELINE = "fp32"
"""The declared baseline: full-precision fp32 matmuls and convolutions, no autotuned algorithms."""

BASELINE_FLAGS: dict[str, Any] = {
    "cuda.matmul.allow_tf32": False,
    "cudnn.allow_tf32": False,
    "cudnn.benchmark": False,
    "cudnn.deterministic": False,
    "float32_matmul_precision": "highest",
}
"""The backend flags of `BASELINE`, as `drkernel.gym.harness.inputs.backend_flags` reports them."""


def mismatch(side: str, flags: Mapping[str, Any] | None, declared: Mapping[str, Any] = BASELINE_FLAGS) -> list[str]:
    """Each flag of ``declared`` that ``flags`` (one side's report) misses or sets otherwise, worded for
    a timing note; no report (None) is no mismatch (a CPU run, an old candidate)."""
    if flags is None:
        return []
    return [f"the {side} ran with {key}={flags.get(key)!r}, the baseline {BASELINE} declares {value!r}"
            for key, value in declared.items() if flags.get(key) != value]
