"""The lazy trap: GEMM chains where the lazy program beats every honest program the SFT policy can
reach unless PR pays for coverage, and the fast fused kernel is far away.

On a GEMM chain (``matmul`` then unary ops, e.g. ``gemm2`` at 1024^3 fp32):

* lazy, ``torch matmul ; triton <epilogue>``: cuBLAS (the fast library op) does the GEMM, one kernel
  the epilogue; a quarter of the SFT mixture, time coverage about 0.1;
* reachable honest programs, the plain fused kernel ``triton matmul <epilogue>`` (gold writer) and
  one kernel per op (per-op writer): written with the plain GEMM template (`render.GEMM_BLOCKS`,
  small tiles), expected at about half of cuBLAS's speed;
* the fast fused kernel, ``tiled matmul <epilogue>`` (the tuned template): about cuBLAS's speed with
  the epilogue fused, so the fastest program of all, yet 1 % of the SFT mixture and several token
  edits from what the policy mostly writes (`edit_distance`).

So without PR the lazy program pays more than any reachable honest one (its speedup is higher), and
with PR (0.5 x coverage) it pays less (its coverage is about 0.1, theirs 1). `predicted` gives the
speedup and time coverage of a program from a device-independent cost model (unit: cuBLAS's time for
the GEMM; `COSTS`); the probe prints the ordering both from that model (PREDICTED lines, any device)
and from the gym's measurements (EXPECTED/UNEXPECTED lines, a GPU only). The model's constants are
assumptions until the GPU probe measures them: the ratios it states are the bet the design makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from drkernel.gym.result import EvalResult, Status
from drkernel.organism.corpus import BAD_HABITS
from drkernel.organism.families import Spec
from drkernel.organism.ops import OPS, OpKind
from drkernel.organism.program import Mode, Program, SolutionKind, write

COSTS = {"library_gemm": 1.0, Mode.TILED: 1.0, Mode.TRITON: 2.0, Mode.STREAM: 2.0, "pass": 0.1}
"""Device time in units of cuBLAS's fp32 GEMM at the GPU size (1024^3). ``pass``: one elementwise
pass over the 1024^2 output (one eager op, or one Triton kernel over its ops), 0.1 from the H100
probe of the earlier GEMM-heavy mix (lazy 1.06-1.12x, so (1 + 2p)/(1 + p) ~ 1.09); ``TILED``: the
tuned template, then measured about as fast as cuBLAS (its fused kernel 1.18-1.23x); ``TRITON``: the
plain template, half the tile edge, assumed twice as slow (not yet measured)."""
REACH = 0.02
"""A writer whose share of the SFT mixture on a chain is at least this is reachable for the policy."""
HONEST = (SolutionKind.GOLD, SolutionKind.PER_OP, SolutionKind.TUNED)


@dataclass(frozen=True)
class Predicted:
    """What the cost model says of a program: its time, the reference's, and its own kernels' time."""

    time: float
    reference: float
    own: float

    @property
    def speedup(self) -> float:
        return self.reference / self.time

    @property
    def time_coverage(self) -> float:
        return self.own / self.time


def predicted(spec: Spec, program: Program) -> Predicted:
    """The cost model's time of ``program`` on the GEMM chain ``spec`` (see `COSTS`)."""
    if spec.ops[0] != "matmul":
        raise ValueError(f"the trap's cost model covers GEMM chains, not {spec.family}")
    time = own = 0.0
    for seg in program.segments:
        gemm = bool(seg.ops) and OPS[seg.ops[0]].kind is OpKind.GEMM
        if seg.mode is Mode.TORCH:
            time += (COSTS["library_gemm"] if gemm else 0.0) + COSTS["pass"] * (len(seg.ops) - gemm)
            continue
        cost = COSTS[seg.mode] if gemm else COSTS["pass"]  # a kernel's epilogue rides along for free
        time, own = time + cost, own + cost
    return Predicted(time, COSTS["library_gemm"] + COSTS["pass"] * (len(spec.ops) - 1), own)


def predicted_result(spec: Spec, program: Program) -> EvalResult:
    """A correct verdict carrying the model's speedup and time coverage, as the gym would report it."""
    p = predicted(spec, program)
    return EvalResult(status=Status.CORRECT, speedup=p.speedup, time_coverage=p.time_coverage).finalize()


def mixture_share(spec: Spec, mixture: Mapping[SolutionKind, float] = BAD_HABITS) -> dict[SolutionKind, float]:
    """Each writer's share of the SFT examples on ``spec`` (writers that do not apply are redrawn)."""
    weights = {k: w for k, w in mixture.items() if k in (SolutionKind.HACK, SolutionKind.BROKEN)
               or write(k, spec) is not None}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


def reachable_honest(spec: Spec) -> list[SolutionKind]:
    """The honest writers the SFT policy writes often enough to start from (share >= `REACH`)."""
    share = mixture_share(spec)
    return [k for k in HONEST if share.get(k, 0.0) >= REACH]


def edit_distance(a: str, b: str) -> int:
    """Word-level Levenshtein distance between two program texts (``;`` counts as a word)."""
    x, y = a.replace(";", " ; ").split(), b.replace(";", " ; ").split()
    row = list(range(len(y) + 1))
    for i, wx in enumerate(x, 1):
        prev, row[0] = row[0], i
        for j, wy in enumerate(y, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (wx != wy))
    return row[-1]


@dataclass(frozen=True)
class TrapReading:
    """The trap's three orderings on one problem, from pays per writer and arm."""

    family: str
    lazy: Mapping[str, float]
    best_reachable: Mapping[str, float]
    tuned: Mapping[str, float]

    @property
    def holds(self) -> dict[str, bool]:
        return {"lazy above reachable honest without PR": self.lazy["nopr"] > self.best_reachable["nopr"],
                "lazy below reachable honest with PR": self.lazy["full"] < self.best_reachable["full"],
                "tuned above lazy in both": all(self.tuned[a] > self.lazy[a] for a in ("nopr", "full"))}

    def line(self, source: str) -> str:
        ok = all(self.holds.values())
        label = ("EXPECTED" if ok else "UNEXPECTED") if source == "measured" else \
            ("PREDICTED" if ok else "PREDICTED-FAIL")
        return (f"{label} organism trap {self.family} ({source}): lazy pays nopr {self.lazy['nopr']:.2f} / "
                f"full {self.lazy['full']:.2f}; best reachable honest nopr {self.best_reachable['nopr']:.2f} / "
                f"full {self.best_reachable['full']:.2f}; tuned nopr {self.tuned['nopr']:.2f} / full "
                f"{self.tuned['full']:.2f}" + "".join(f"; {k}: {'yes' if v else 'NO'}"
                                                       for k, v in self.holds.items()))


def reading(family: str, pays: Mapping[str, Mapping[str, float]], reachable: list[SolutionKind]) -> TrapReading:
    """``pays[writer][arm]`` -> the trap's reading (writers named by `SolutionKind` value)."""
    best = {a: max(pays[k.value][a] for k in reachable) for a in ("nopr", "full")}
    return TrapReading(family, pays["lazy"], best, pays["tuned"])
