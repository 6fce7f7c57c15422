"""Evaluation configuration and request. Plain frozen dataclasses (the gym uses only the stdlib,
torch, triton and numpy; the service wraps these in pydantic at its edge)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from drkernel.config import from_mapping
from drkernel.devices import Device
from drkernel.errors import ConfigError
from drkernel.gym.seeds import SeedPlan
from drkernel.problems.problem import Problem

TOLERANCE_PROFILES: dict[str, dict[str, tuple[float, float]]] = {
    # profile -> dtype -> (atol, rtol)
    "kernelgym": {"float32": (1e-2, 1e-2), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)},
    "kernelbench": {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2)},
}
VERDICT_MODES = ("lenient", "strict")
REFERENCE_MODES = ("eager", "compile")
TIMING_RULES = ("adaptive", "fixed")
TIMED_PREDRAW_ENV = "DRKERNEL_TIMED_PREDRAW"
"""``1``: `EvalConfig.timed_predraw` defaults to True in this process (side-by-side runs)."""
LANGUAGES = ("triton", "cuda")
"""What a solution may be written in (`EvalRequest.language`)."""


FP8_RTOL = {"float8_e4m3fn": 2.0**-3, "float8_e4m3fnuz": 2.0**-3, "float8_e5m2": 2.0**-2, "float8_e5m2fnuz": 2.0**-2}
"""An fp8 output's relative tolerance in every profile: one step of its 3 (e4m3) or 2 (e5m2) mantissa
bits. Two honest kernels that scale before rounding in a different order land a step apart, which no
profile's 1e-2 would allow."""


def tolerance_for(profile: str, dtype: str) -> tuple[float, float]:
    """(atol, rtol) of a tolerance profile for an output dtype (fp32 values for other dtypes; an fp8
    dtype's relative term is one step of its mantissa, `FP8_RTOL`)."""
    table = TOLERANCE_PROFILES[profile]
    atol, rtol = table.get(dtype, table["float32"])
    return atol, max(rtol, FP8_RTOL.get(dtype, 0.0))


@dataclass(frozen=True)
class EvalConfig:
    """How one solution is evaluated. Every field is part of the result-cache key."""

    trials: int = 5
    """Correctness trials, each with fresh seeded inputs (the paper uses 5)."""
    tolerance: str = "kernelgym"
    """Tolerance profile: ``kernelgym`` (atol = rtol = 1e-2) or ``kernelbench`` (fp32 1e-4, fp16/bf16 1e-2)."""
    device: str = "auto"
    """``auto`` (cuda when available, else cpu), ``cuda``, ``cuda:N`` or ``cpu`` (Triton interpreter)."""
    seed: int | None = None
    """None (training, service): every seed of the evaluation is drawn fresh from a CSPRNG.
    An int: a reproducible plan derived from it, for debugging and determinism tests
    (`drkernel.gym.seeds`)."""
    timing: bool = True
    """Time reference and solution (GPU only; on CPU timing fields are null and say why)."""
    warmup_calls: int = 10
    """Untimed calls before timing."""
    timed_calls: int = 100
    """Timed calls per side; each on cloned inputs after an L2 flush."""
    l2_flush: bool = True
    """Write a buffer larger than L2 before every timed call."""
    head_start_max_ms: float = 1.0
    """Cap of the device's head start before each timed call, which keeps the host's time to issue the
    call out of the events (`drkernel.gym.harness.timing`); 0 turns it off."""
    timed_calls_max: int = 0
    """Time more than ``timed_calls``, up to this many, while the median's relative standard error is
    above ``timing_target_rse`` (0: exactly ``timed_calls``)."""
    timing_target_rse: float = 0.001
    """Target relative standard error of a timed median, used when ``timed_calls_max`` allows more calls."""
    timing_budget_ms: float = 1000.0
    """Wall budget of the timed calls of one side: a call the warm-up measured slower than
    ``timing_budget_ms / timed_calls`` gets fewer timed calls, never fewer than ``timed_calls_min`` (0:
    always ``timed_calls``). A 100 ms kernel then holds the device's exclusive timed region for about
    1 s instead of 10 s (measured: one slow solution held it 11.7 s of a 106 s sustained run on an H100,
    while every other candidate on the device waited); a kernel of that length needs few calls for a
    stable median. Kernels faster than 10 ms per call are not affected."""
    timed_calls_min: int = 10
    """The fewest timed calls ``timing_budget_ms`` or the adaptive rule may leave (at most ``timed_calls``);
    the adaptive rule's block."""
    timing_rule: str = "adaptive"
    """When the timed calls stop (`drkernel.gym.harness.timing`): ``adaptive`` once the median's
    confidence interval is within ``timing_precision`` of it (checked every ``timed_calls_min`` calls,
    ``timed_calls`` and the budget the most), so a steady kernel holds the device's exclusive region
    for a fraction of the calls; ``fixed``: every one of ``timed_calls`` (within the budget), extended
    up to ``timed_calls_max`` while the median's standard error is above ``timing_target_rse``."""
    timing_precision: float = 0.005
    """Adaptive rule: the largest distance from the median to either end of its 95 % order-statistic
    confidence interval, relative to the median, at which timing stops."""
    timed_predraw: bool = os.environ.get(TIMED_PREDRAW_ENV, "0") == "1"
    """Draw the first timed calls' inputs (`drkernel.gym.harness.timing.ahead_calls`) before the device's
    exclusive timed region, within the candidate's input budget, instead of each at its call inside the
    region: the same tensors in the same order, the region shorter by the host's time to draw them (the
    draws' seconds are the candidate's ``timed_inputs`` stage). Off by default: on an H100 (2026-11-27,
    sustained mix, 45 s each on one warm machine) it ran 0.756 evaluations/s against 0.692 with the
    same exclusive seconds per evaluation (0.153 vs 0.150), one run each, not a proven win. The
    environment's ``DRKERNEL_TIMED_PREDRAW=1`` at this module's import turns the default on."""
    reference: str = "eager"
    """Reference for speedup: ``eager`` PyTorch or ``compile`` (torch.compile of the reference)."""
    profile: bool = True
    """Run the profiler pass (time coverage, side-stream cross-check) on GPU."""
    timeout_s: float = 300.0
    """Wall-clock limit for the candidate child, all stages included."""
    memory_fraction: float = 0.9
    """``torch.cuda.set_per_process_memory_fraction`` in the candidate."""
    rss_limit_mb: int = 16384
    """Host resident-size limit for the candidate child, enforced by a watcher (not RLIMIT_AS)."""
    verdict_mode: str = "lenient"
    """Which hack verdict ``valid`` reports: ``lenient`` (the paper's) or ``strict``; both are stored."""
    coverage_floor: float = 0.1
    """Lenient mode: own kernels doing less than this share of the reference's compute is hack 2."""
    strict_allowlist: tuple[str, ...] = ()
    """Strict mode: aten ops (e.g. ``aten::add.Tensor``) ModelNew may run in PyTorch besides the always-allowed ones."""
    cpu_scale: bool = True
    """On CPU, scale problem sizes down (generic rule plus the problem's overrides)."""
    cpu_element_budget: int = 1 << 18
    """Generic CPU scale-down target: total elements of inputs and parameters."""
    second_size: bool = True
    """Run one extra correctness trial at a second problem size where the problem allows it."""

    def __post_init__(self) -> None:
        problems = []
        if self.tolerance not in TOLERANCE_PROFILES:
            problems.append(f"tolerance={self.tolerance!r} (one of {sorted(TOLERANCE_PROFILES)})")
        if self.verdict_mode not in VERDICT_MODES:
            problems.append(f"verdict_mode={self.verdict_mode!r} (one of {VERDICT_MODES})")
        if self.reference not in REFERENCE_MODES:
            problems.append(f"reference={self.reference!r} (one of {REFERENCE_MODES})")
        if self.trials < 1:
            problems.append(f"trials={self.trials} (at least 1)")
        try:
            Device.parse(self.device, "device")
        except ConfigError as e:
            problems.append(str(e))
        if self.head_start_max_ms < 0:
            problems.append(f"head_start_max_ms={self.head_start_max_ms} (at least 0)")
        if self.timed_calls_max and self.timed_calls_max < self.timed_calls:
            problems.append(f"timed_calls_max={self.timed_calls_max} (0, or at least timed_calls={self.timed_calls})")
        if self.timing_budget_ms < 0 or self.timed_calls_min < 1:
            problems.append(f"timing_budget_ms={self.timing_budget_ms} (at least 0), timed_calls_min="
                            f"{self.timed_calls_min} (at least 1)")
        if self.timing_rule not in TIMING_RULES or not 0.0 < self.timing_precision < 1.0:
            problems.append(f"timing_rule={self.timing_rule!r} (one of {TIMING_RULES}), timing_precision="
                            f"{self.timing_precision} (in (0, 1))")
        if not 0.0 < self.memory_fraction <= 1.0:
            problems.append(f"memory_fraction={self.memory_fraction} (in (0, 1])")
        if problems:
            raise ConfigError("invalid EvalConfig: " + "; ".join(problems))

    def replace(self, **changes: Any) -> "EvalConfig":
        return EvalConfig.from_dict({**self.to_dict(), **changes})

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["strict_allowlist"] = list(self.strict_allowlist)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EvalConfig":
        """Types checked and unknown keys named by the project's one loader (`drkernel.config`)."""
        return from_mapping(cls, d)


@dataclass(frozen=True)
class EvalRequest:
    """One solution to evaluate against one problem."""

    problem: Problem
    solution: str
    config: EvalConfig = field(default_factory=EvalConfig)
    request_id: str = ""
    language: str = "triton"
    """What the solution is written in: ``triton`` (own ``@triton.jit`` kernels) or ``cuda`` (own
    ``__global__`` kernels built by ``load_inline`` from its source; `drkernel.gym.cuda`)."""

    seed_plan: SeedPlan | None = None
    """None: the judge draws the seeds (`EvalConfig.seed`). A plan: a result's revealed seeds
    (``provenance.seeds``), evaluated again on the very inputs (`drkernel.gym.replay`); the judge uses
    it only if it could have drawn it (`drkernel.gym.seeds.replayed_plan`)."""

    def __post_init__(self) -> None:
        if self.language not in LANGUAGES:
            raise ConfigError(f"invalid EvalRequest: language={self.language!r} (one of {LANGUAGES})")

    def content_hash(self, device_name: str = "") -> str:
        """Cache key: problem, solution, configuration and the device model."""
        h = hashlib.sha256()
        for part in (self.problem.code_hash, self.solution,
                     json.dumps(self.config.to_dict(), sort_keys=True), device_name):
            h.update(part.encode())
            h.update(b"\0")
        if self.language != "triton":  # triton keys stay as they were before languages existed
            h.update(self.language.encode())
        if self.seed_plan is not None:  # a replay is evaluated again, never answered from the cache
            h.update(json.dumps(asdict(self.seed_plan), sort_keys=True).encode())
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        out = {"problem": self.problem.to_dict(), "solution": self.solution,
               "config": self.config.to_dict(), "request_id": self.request_id, "language": self.language}
        return out if self.seed_plan is None else {**out, "seed_plan": asdict(self.seed_plan)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EvalRequest":
        return cls(problem=Problem.from_dict(d["problem"]), solution=str(d["solution"]),
                   config=EvalConfig.from_dict(d.get("config") or {}),
                   request_id=str(d.get("request_id", "")), language=str(d.get("language", "triton")),
                   seed_plan=_seed_plan(d.get("seed_plan")))


def _seed_plan(raw: Any) -> SeedPlan | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ConfigError("invalid EvalRequest: seed_plan must be an object (a result's provenance.seeds)")
    try:
        return SeedPlan.from_dict(dict(raw))
    except ValueError as e:
        raise ConfigError(f"invalid EvalRequest: seed_plan: {e}") from e
