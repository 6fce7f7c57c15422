"""`EvalResult`, schema v2: the verdict on one solution.

Every field later work fills (hacks, coverage, timings) is present from v1 and nullable, so a
consumer written against v1 keeps working. A bad solution is a result with a `Status`, never an
exception. ``to_json``/``from_json`` round-trip exactly; the service stores this JSON.

Schema history:
    v1  the verdict, trials, timings, coverage, kernels.
    v2  ``provenance`` (what a re-run must match: device, clocks, versions, the baseline's precision,
        hashes, the revealed seeds), ``speedup_ci`` and its level, ``roofline_ms`` and
        ``sol_fraction``. A v1 result reads with these fields null.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from typing import Any, Mapping

SCHEMA_VERSION = 2


class Status(str, Enum):
    """How far a solution got. Only ``CORRECT`` means compiled and correct (hacks are separate)."""

    CORRECT = "correct"                      # compiled, every trial within tolerance
    INCORRECT = "incorrect"                  # ran, wrong values / shape / dtype / NaN
    SYNTAX_ERROR = "syntax_error"            # the source does not parse
    NO_MODELNEW = "no_modelnew"              # no `class ModelNew` defined
    SIGNATURE_MISMATCH = "signature_mismatch"  # constructor or forward signature differs from Model's
    IMPORT_ERROR = "import_error"            # importing the solution raised
    COMPILE_ERROR = "compile_error"          # a Triton kernel failed to compile
    RUNTIME_ERROR = "runtime_error"          # forward raised
    TIMEOUT = "timeout"                      # the candidate exceeded its wall-clock limit
    CRASHED = "crashed"                      # the candidate died (segfault, illegal address, os._exit)
    OUT_OF_MEMORY = "out_of_memory"          # device OOM or the host RSS watch fired
    UNSUPPORTED_ON_CPU = "unsupported_on_cpu"  # failed for a reason only the Triton interpreter has
    REJECTED = "rejected"                    # not run: static checks found a blocking hack

    @property
    def compiled(self) -> bool | None:
        """Whether the solution got past import and kernel compilation (None: unknown)."""
        if self in (Status.CORRECT, Status.INCORRECT, Status.RUNTIME_ERROR):
            return True
        if self in (Status.SYNTAX_ERROR, Status.NO_MODELNEW, Status.SIGNATURE_MISMATCH,
                    Status.IMPORT_ERROR, Status.COMPILE_ERROR):
            return False
        return None


class Verdict(str, Enum):
    """Which hack verdict `EvalResult.valid` reports."""

    LENIENT = "lenient"
    STRICT = "strict"


@dataclass(frozen=True)
class Hack:
    """One detected reward hack. ``code`` is the number in docs/METHOD.md section 3."""

    code: int
    name: str            # e.g. "decoy_kernel", "pytorch_passthrough"
    evidence: str        # what was observed
    message: str         # one sentence a human or a model can act on
    strict_only: bool = False  # flagged only by the strict verdict


@dataclass(frozen=True)
class TrialResult:
    trial: int
    seed: int
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str = ""
    size: str = "primary"  # "primary" or "second" (the second-size trial)
    degenerate: str | None = None  # a trivial answer the reference accepts here (gym/judge/tolerance.py)


@dataclass(frozen=True)
class TimingStats:
    """Per-call device times in milliseconds over ``n`` timed calls."""

    median_ms: float
    iqr_ms: float
    cv: float            # std / mean
    mean_ms: float
    min_ms: float
    n: int
    wall_ms_per_call: float | None = None  # synchronised wall clock around the batch, per call
    rse: float | None = None            # relative standard error of the median (timing.median_rse)
    head_start_ms: float | None = None  # the device's head start before each call (timing.py)
    host_ms: float | None = None        # median host time to issue one call
    inputs_ms: float | None = None      # median host time to make one call's inputs (a clone or a fresh draw)
    uncovered: float | None = None      # share of calls whose issue outlasted the head start
    profiled_ms: float | None = None    # device time of one call's kernels, a few more calls under the profiler
    profiled_span_ms: float | None = None  # least event time of those calls (the host's launches included)
    profiled_calls: float | None = None  # how many there were (fewer than three where inputs are large)


@dataclass(frozen=True)
class KernelStat:
    """One kernel seen while running ``forward``."""

    name: str
    own: bool                       # its @triton.jit function is defined in the solution's source
    launches: int
    device_time_ms: float | None = None


@dataclass(frozen=True)
class Provenance:
    """What a number depends on, so that a re-run can be checked against it (`drkernel.gym.replay`).

    Fields that do not apply (clocks on a CPU, a driver without ``nvidia-smi``) are None. The seeds
    are the evaluation's secret plan, revealed only here, once the evaluation is over.
    """

    gpu_model: str = ""                    # the device's name; "cpu (triton interpreter)" on CPU
    driver_version: str | None = None      # NVIDIA driver, from nvidia-smi
    cuda_version: str | None = None        # the CUDA torch was built with
    clocks_start: dict[str, float] | None = None  # {"sm_mhz", "mem_mhz"} before the solution ran
    clocks_end: dict[str, float] | None = None    # the same after the last timing
    clocks_locked: bool | None = None      # application clocks pinned (nvidia-smi -lgc)
    torch_version: str = ""
    triton_version: str = ""
    drkernel_version: str = ""
    reference_mode: str = "eager"          # EvalConfig.reference: eager or compile
    precision: str = ""                    # the declared baseline (`drkernel.gym.precision`)
    reference_flags: dict[str, Any] = field(default_factory=dict)  # backend flags the judge ran under
    solution_flags: dict[str, Any] | None = None  # backend flags in the candidate after its run
    tolerance_profile: str = ""
    config_hash: str = ""                  # sha256 of the EvalConfig's sorted JSON
    problem_hash: str = ""                 # sha256 of the problem's code
    solution_hash: str = ""
    seeds: dict[str, Any] | None = None    # the seed plan (`drkernel.gym.seeds.SeedPlan`), revealed


@dataclass
class EvalResult:
    """The verdict on one solution. See docs/ARCHITECTURE.md for what fills each field."""

    status: Status
    problem_key: str = ""
    request_id: str = ""
    schema_version: int = SCHEMA_VERSION
    compiled: bool | None = None
    correct: bool | None = None
    valid: bool | None = None              # compiled and correct and no hack (by verdict_mode)
    valid_lenient: bool | None = None
    valid_strict: bool | None = None
    verdict_mode: str = Verdict.LENIENT.value
    hacks: list[Hack] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # e.g. lazy optimization
    error: str | None = None               # trimmed tail of the error, for humans and models
    trials: list[TrialResult] = field(default_factory=list)
    tolerance_profile: str = "kernelgym"
    atol: float | None = None
    rtol: float | None = None
    backend_flags: dict[str, Any] = field(default_factory=dict)  # pinned TF32 / cuDNN flags
    device: str = ""                       # "cpu" or "cuda:0"
    device_name: str = ""                  # e.g. "NVIDIA H100 80GB HBM3", "cpu (triton interpreter)"
    ref_timing: TimingStats | None = None
    sol_timing: TimingStats | None = None
    speedup: float | None = None
    timing_note: str | None = None         # why timing is missing, or what re-measurement found
    reference_cached: bool | None = None
    time_coverage: float | None = None     # GPU: own-kernel device time / all kernel time
    op_coverage: float | None = None       # share of the reference's compute done in own kernels
    kernels: list[KernelStat] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    solution_hash: str = ""
    elapsed_s: float | None = None
    # v2
    provenance: Provenance | None = None
    speedup_ci: tuple[float, float] | None = None  # (low, high) bounds of the speedup
    speedup_ci_level: float | None = None  # their joint coverage, e.g. 0.95 (`drkernel.gym.speedup`)
    roofline_ms: float | None = None       # the reference's speed-of-light time on this device
    sol_fraction: float | None = None      # roofline_ms / the solution's median time (`drkernel.gym.roofline`)
    language: str = "triton"               # what the solution is written in (`EvalRequest.language`)

    @property
    def hacked(self) -> bool:
        """Whether a hack counted by ``verdict_mode`` was found."""
        if self.verdict_mode == Verdict.STRICT.value:
            return bool(self.hacks)
        return any(not h.strict_only for h in self.hacks)

    @property
    def degenerate(self) -> str | None:
        """The judge's finding that a trivial answer (zeros, a constant, an input) meets the reference
        within its tolerance on every primary-size trial, else None: such a verdict cannot tell work
        from no work (the reward pays neither, `drkernel.reward.turn_reward`)."""
        primary = [t for t in self.trials if t.size == "primary"]
        return primary[0].degenerate if primary and all(t.degenerate for t in primary) else None

    def finalize(self) -> "EvalResult":
        """Derive ``compiled``, ``correct`` and the three validity flags from status and hacks."""
        if self.compiled is None:
            self.compiled = self.status.compiled
        self.correct = self.status is Status.CORRECT
        self.valid_lenient = self.correct and not any(not h.strict_only for h in self.hacks)
        self.valid_strict = self.correct and not self.hacks
        self.valid = self.correct and not self.hacked
        return self

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EvalResult":
        d = dict(d)
        version = d.get("schema_version", SCHEMA_VERSION)
        if version > SCHEMA_VERSION:
            raise ValueError(f"EvalResult schema_version {version} is newer than {SCHEMA_VERSION}")
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["status"] = Status(d["status"])
        d["hacks"] = [Hack(**h) for h in d.get("hacks") or []]
        d["trials"] = [TrialResult(**t) for t in d.get("trials") or []]
        d["kernels"] = [KernelStat(**k) for k in d.get("kernels") or []]
        for key in ("ref_timing", "sol_timing"):
            if d.get(key) is not None:
                d[key] = TimingStats(**d[key])
        if d.get("provenance") is not None:
            d["provenance"] = Provenance(**d["provenance"])
        if d.get("speedup_ci") is not None:
            low, high = d["speedup_ci"]
            d["speedup_ci"] = (float(low), float(high))
        return cls(**d)

    @classmethod
    def from_json(cls, s: str) -> "EvalResult":
        return cls.from_dict(json.loads(s))
