"""The ablation arms and the run scales of the organism (what each run trains, and how big it is)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from drkernel.errors import ConfigError
from drkernel.rl.config import Advantage


@dataclass(frozen=True)
class Arm:
    """One ablation arm: which parts of the method are on."""

    name: str
    description: str
    integrity: bool
    """The reward sees the gym's verdict with its full checks: hack flags and coverage (False: the
    reward reads the verdict of the gym with only its core checks, `core_checks`: nothing is flagged
    or blocked as a hack, a side-stream kernel is timed as the calling stream's events see it, and
    the coverage term of PR is absent; the metrics still read the full checks' verdict)."""
    advantage: Advantage
    """TRLOO (the paper's) or GRPO."""
    pr: bool
    """Profiling-based reward (the coverage term)."""
    prs: bool
    """Profiling-based rejection sampling."""
    expect: str
    """What the paper predicts for this arm."""


ARMS: dict[str, Arm] = {a.name: a for a in (
    Arm("nocheck", "hack checks off: the reward reads the gym with core checks only (no static check, no "
        "integrity hook or verdict: hacks run, are timed and paid; no coverage, so PR and PRS see nothing); "
        "TRLOO+MRS", False, Advantage.TRLOO, True, True, "hacks take over"),
    Arm("nopr", "checks on, no PR / PRS (TRLOO+MRS)", True, Advantage.TRLOO, False, False,
        "lazy optimisation settles in"),
    Arm("full", "TRLOO+MRS+PR+PRS", True, Advantage.TRLOO, True, True, "fused kernels and Fast@1.2 rise"),
    Arm("grpo", "GRPO instead of TRLOO, multi-turn (+MRS+PR+PRS)", True, Advantage.GRPO, True, True,
        "below TRLOO (biased self-inclusive baseline)"),
)}


@dataclass(frozen=True)
class Scale:
    """How big one run is. ``families`` empty means every training family."""

    name: str
    model: str                      # drkernel.organism.model.SIZES key
    n_train: int
    n_heldout: int
    heldout_samples: int
    families: tuple[str, ...] = ()
    sft_specs: int = 3000
    sft_draws: int = 1
    """Examples per corpus instance."""
    sft_steps: int = 1500
    sft_batch: int = 64
    sft_lr: float = 1e-3
    steps: int = 12
    prompts_per_step: int = 8
    samples_per_prompt: int = 8
    turns: int = 2
    stop_p: float = 0.0
    """Chance a trajectory ends after each turn but the last (`EnvSettings.stop_p`): varying N_t."""
    max_tokens: int = 32
    rl_lr: float = 1e-4
    mini_batches: int = 2
    budget_s: float = 0.0
    """Stop after the step that crosses this many seconds of RL (0: no limit)."""
    gym: dict[str, Any] = field(default_factory=dict)
    """EvalConfig fields besides the device."""
    torch_threads: int = 0
    """Intra-op threads of this process during the run (0: leave as is). The CPU scales use 1: on a
    shared, oversubscribed host two spinning OpenMP threads made a tiny model's step 20x slower."""
    problem_seed: int | None = None
    """The seed that draws the problems (RL, held-out, the SFT corpus's instances); None: the run's
    seed. Fixed, every seed trains on the same problems: the seed spread is then the spread of
    training (SFT init, sampling, RL), the arms are compared on the same tasks, and the verdict cache
    is shared by every seed, not only by the arms of one."""

    def problems_of(self, seed: int) -> int:
        return seed if self.problem_seed is None else self.problem_seed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Three trials on the GPU: one plain, one spread (x8), one shifted (+100) in every evaluation, so a
# verdict (cached per program) does not hang on which variant a single extra trial drew.
GPU_GYM = {"trials": 3, "warmup_calls": 3, "timed_calls": 20, "second_size": False, "timeout_s": 120.0}
CPU_GYM = {"trials": 1, "second_size": False, "timing": False, "timeout_s": 120.0}

GPU_MIX = ("gemm2", "row-softmax", "gemm2", "ew3", "gemm2", "row-layernorm", "gemm2", "ew4")
"""The GPU scale's training families, round robin (`families.generate`): half GEMM, a quarter row
reductions, a quarter elementwise chains. On an elementwise chain a fused kernel is 2-3x faster than
eager PyTorch, so lazy loses there without any coverage term; the GEMM chains are where lazy is a
trap (`drkernel.organism.trap`): ``torch matmul ; triton <epilogue>`` (cuBLAS) beats every program
the policy can reach with the plain Triton GEMM template and loses only to the tuned fused kernel
(``tiled``), which the SFT mixture rarely shows. Only ``gemm2``: with a one-op epilogue (``gemm1``)
the kernel's share of the reference's roofline cost (about 7 % at 1024^3) is under the gym's coverage
floor (10 %), so the lazy program is already flagged as a passthrough (hack 2) there; with two ops it
is about 13 %. The SFT corpus draws its 3000 instances from the same families (the GEMM and row
families saturate, elementwise chains fill the rest)."""

SCALES: dict[str, Scale] = {s.name: s for s in (
    # the GPU arms: about 11 M parameters, 16 problems (GPU_MIX, the same for every seed), 12 steps of
    # up to 3 turns (a trajectory stops after a turn with chance 0.3, so N_t varies); the 110 s RL
    # budget only guards a section's time limit
    Scale("gpu", model="gpu", n_train=16, n_heldout=6, heldout_samples=4, families=GPU_MIX, steps=12,
          turns=3, stop_p=0.3, budget_s=110.0, gym=GPU_GYM, problem_seed=0),
    # the test suite's learning check: one ew2 problem, 32 samples per step, 5 steps
    Scale("cpu", model="cpu", n_train=1, n_heldout=0, heldout_samples=0, families=("ew2",), sft_specs=1,
          sft_draws=48, sft_steps=150, sft_batch=32, sft_lr=3e-3, steps=5, prompts_per_step=1,
          samples_per_prompt=32, turns=1, max_tokens=16, rl_lr=1e-3, mini_batches=2, gym=CPU_GYM,
          torch_threads=1),
    # the GPU sections' CPU dry run: every stage (SFT, two turns, held-out, report) at toy size
    Scale("dry", model="cpu", n_train=2, n_heldout=1, heldout_samples=2, families=("ew2", "ew3"),
          sft_specs=2, sft_draws=24, sft_steps=150, sft_batch=32, sft_lr=3e-3, steps=2, prompts_per_step=2,
          samples_per_prompt=4, turns=2, stop_p=0.3, max_tokens=16, rl_lr=1e-3, mini_batches=1, gym=CPU_GYM,
          torch_threads=1),
)}


def arm(name: str) -> Arm:
    if name not in ARMS:
        raise ConfigError(f"unknown organism arm {name!r} (one of {sorted(ARMS)})")
    return ARMS[name]


def scale(name: str) -> Scale:
    if name not in SCALES:
        raise ConfigError(f"unknown organism scale {name!r} (one of {sorted(SCALES)})")
    return SCALES[name]
