"""Coverage arithmetic without torch: roofline costs, op and time coverage, always-allowed ops.

The op recorder that produces an ``OpProfile`` runs in the judge and the candidate
(``drkernel.gym.harness.recorder``); this half is what the orchestrator's verdict reads.
"""

from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any, Mapping
from drkernel.gym.result import KernelStat


ALWAYS_ALLOWED = frozenset((
    # allocation and fills
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "fill", "fill_",
    "zero_", "scalar_tensor", "arange", "resize_", "set_", "lift_fresh", "lift_fresh_copy",
    # views and reshapes
    "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided", "permute", "transpose",
    "transpose_", "t", "t_", "expand", "squeeze", "squeeze_", "unsqueeze", "unsqueeze_", "slice",
    "select", "split", "split_with_sizes", "chunk", "unbind", "narrow", "alias", "detach", "diagonal",
    "view_as_real", "view_as_complex", "unfold", "movedim", "flatten", "unflatten", "expand_as",
    "view_as", "_unsafe_split", "real", "imag", "conj", "_conj", "_neg_view",
    # dtype / contiguity / device changes
    "clone", "contiguous", "copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize",
    # metadata
    "_local_scalar_dense", "is_same_size", "sym_size", "sym_stride", "sym_numel", "size", "stride",
    "numel", "dim", "is_nonzero",
))

HOST_COPY = "aten::device_to_host.default"
"""A pseudo-op: a copy from an accelerator to the host (its flops column holds nothing, bytes the
elements). The verdict flags more than a scalar's worth: compute outside PyTorch (mechanism 5)."""

UNPRICED = "aten::unpriced.default"
"""A pseudo-op: the count of ops a solution ran that the recorder could not price (compute with no
formula, operands pricing cannot read, a formula that raised). Its cost is unknown, so it is taken
to be at least the reference's whole work: a profile holding one has op coverage 0."""

def base_name(name: str) -> str:
    """``"aten::add.Tensor"`` -> ``"add"``."""
    return name.split("::")[-1].split(".")[0]

@dataclass
class OpProfile:
    """Aten ops one ``forward`` ran, each with its count and roofline cost (seconds on `NOMINAL`)."""

    ops: dict[str, list[float]] = field(default_factory=dict)  # name -> [count, cost_s, flops, bytes]

    def add(self, name: str, cost: float, flops: float, nbytes: float) -> None:
        entry = self.ops.setdefault(name, [0, 0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += cost
        entry[2] += flops
        entry[3] += nbytes

    @property
    def unpriced(self) -> int:
        return int(self.ops.get(UNPRICED, [0])[0])

    def worst(self, other: "OpProfile") -> "OpProfile":
        """Per op, the largest count and cost either profile ran: the profile of the costliest call
        for every op at once, so coverage and host reads hold for every call, not one of them."""
        ops = {k: list(v) for k, v in self.ops.items()}
        for k, v in other.ops.items():
            ops[k] = [max(a, b) for a, b in zip(ops.get(k, [0, 0.0, 0.0, 0.0]), v)]
        return OpProfile(ops)

    def contraction_rate(self, bandwidth: float) -> float | None:
        """The fastest FLOP rate any compute-bound op of this profile was priced at (None: none is
        compute-bound at ``bandwidth``): for a reference, the rate its contractions run at."""
        rates = [v[2] / v[1] for v in self.compute_ops().values() if v[1] > 0 and v[1] > v[3] / bandwidth * (1 + 1e-9)]
        return max(rates) if rates else None

    def compute_ops(self) -> dict[str, list[float]]:
        """The ops that are compute (not allocation, views or dtype/contiguity changes)."""
        return {k: v for k, v in self.ops.items() if base_name(k) not in ALWAYS_ALLOWED}

    @property
    def cost(self) -> float:
        """Roofline seconds of every priced op: compute, and copies (always allowed, yet they move data)."""
        return sum(v[1] for v in self.ops.values())

    @property
    def flops(self) -> float:
        return sum(v[2] for v in self.ops.values())

    @property
    def bytes(self) -> float:
        return sum(v[3] for k, v in self.ops.items() if k != HOST_COPY)

    def outside(self, allowlist: tuple[str, ...]) -> dict[str, list[float]]:
        """Compute ops not in a strict-mode allowlist (entries match ``aten::add.Tensor`` or ``add``)."""
        allowed = set(allowlist) | {base_name(a) for a in allowlist if "." not in a.split("::")[-1]}
        return {k: v for k, v in self.compute_ops().items()
                if k not in allowed and base_name(k) not in allowed}

    def describe(self, ops: Mapping[str, list[float]] | None = None, limit: int = 5) -> str:
        ops = self.compute_ops() if ops is None else ops
        top = sorted(ops.items(), key=lambda kv: -kv[1][1])[:limit]
        return ", ".join(f"{k} x{int(v[0])}" for k, v in top)

    def to_dict(self) -> dict[str, list[float]]:
        return {k: list(v) for k, v in self.ops.items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, list[float]]) -> "OpProfile":
        return cls({k: list(v) for k, v in d.items()})

def op_coverage(reference: OpProfile, solution: OpProfile, own_launches: int) -> float:
    """Share of the reference's compute the solution did not leave to PyTorch (see module docstring)."""
    if own_launches <= 0 or solution.unpriced:
        return 0.0
    ref = reference.cost
    if ref <= 0.0:
        return 1.0 if solution.cost <= 0.0 else 0.0
    return min(1.0, max(0.0, 1.0 - solution.cost / ref))

def time_coverage(kernels: list[KernelStat]) -> float | None:
    """Own-kernel device time / all device time of one forward's kernels; None without timings."""
    timed = [k for k in kernels if k.device_time_ms is not None]
    total = sum(k.device_time_ms for k in timed)
    if not timed or total <= 0.0:
        return None
    return sum(k.device_time_ms for k in timed if k.own) / total


TIME_COVERAGE_FLOOR = 0.1
"""Below this share of one forward's device time in its own kernels, a solution no faster than the
reference is not paid (`time_coverage_hack`)."""


COVERAGE_AGREEMENT = 0.25
"""Least ratio of time coverage (the profiled timed calls) to op coverage (the observed calls) for a
solution whose observed calls did most of the work in its own kernels (`coverage_apart`)."""
OBSERVED_MOST = 0.5
"""Op coverage from which the two coverages must agree (below it the solution is lazy either way)."""


def work_time_coverage(kernels: list[KernelStat]) -> float | None:
    """Time coverage of the work, not the launches: own kernels' share of the device time once each
    other kernel's launches are discounted by `LAUNCH_ALLOWANCE_MS` (a 24-row loss's four PyTorch
    epilogue kernels, launch-bound at a few microseconds each, took 80 % of a tiny forward's device
    time: honest round 11). None without device times."""
    timed = [k for k in kernels if k.device_time_ms is not None]
    own, other = sum(k.device_time_ms for k in timed if k.own), _other_work_ms(timed)
    return own / (own + other) if own + other > 0 else None


def _other_work_ms(timed: list[KernelStat]) -> float:
    """Device time of the kernels the solution did not launch, each launch's first
    `LAUNCH_ALLOWANCE_MS` left out (a launch costs that whatever its work)."""
    return sum(max(0.0, k.device_time_ms - LAUNCH_ALLOWANCE_MS * max(1, k.launches)) for k in timed if not k.own)


def coverage_apart(op_cov: float | None, time_cov: float | None) -> str | None:
    """Evidence for hack 2 when the observed calls and the profiled timed calls disagree about whose
    kernels do the work: own kernels did at least ``OBSERVED_MOST`` of the reference's work in the
    observed calls (op coverage) but ran under ``COVERAGE_AGREEMENT`` of that share of the device time
    when profiled in the timed region (time coverage). Both measure one forward's split between own
    and other kernels, by work and by time; an honest forward's two shares differ by how efficient
    its kernels are next to PyTorch's, never by this much. A forward that recognises being observed
    (the poisoned allocations, a dispatch mode's latency) and hands the work to library kernels
    elsewhere shows exactly this split. ``time_cov`` is the work's (`work_time_coverage`): a launch
    costs a few microseconds whatever its work."""
    if op_cov is None or time_cov is None or op_cov < OBSERVED_MOST or time_cov >= COVERAGE_AGREEMENT * op_cov:
        return None
    return (f"own kernels did {op_cov:.0%} of the reference's work in the observed calls but ran "
            f"{time_cov:.1%} of the device time in the profiled timed calls: the forward runs other "
            f"work when it is not observed")


LAUNCH_ALLOWANCE_MS = 0.005
"""Device time a kernel launch may take whatever its work (a fill of a one-element accumulator, a
small copy): left out of `unexplained_time`'s share, which is about work, not launches."""
UNEXPLAINED_SHARE = 0.2
"""Least share of a profiled forward's device time in kernels the solution did not launch, beyond
launch allowances, that `unexplained_time` weighs."""
UNEXPLAINED_FACTOR = 10.0
"""How many times the observed calls' PyTorch share (1 - op coverage) that device time share may be."""


def unexplained_time(op_cov: float | None, kernels: list[KernelStat]) -> str | None:
    """Evidence for hack 2 when the profiled timed calls spent a share of their device time in
    kernels the solution did not launch that its observed calls' PyTorch work cannot explain: the
    observed calls left ``1 - op_cov`` of the reference's work (by roofline cost, copies included) to
    PyTorch, the timed calls gave other kernels ``share`` of the device time (each launch's first
    `LAUNCH_ALLOWANCE_MS` not counted), and ``share`` is at least `UNEXPLAINED_SHARE` and above
    `UNEXPLAINED_FACTOR` times that plus 0.05. An honest forward runs the same code in both, so its
    PyTorch kernels take a time near their cost; a forward that recognises the unobserved calls (a
    tell in fresh allocations, the dispatch stack) and hands work to a library only there does not."""
    timed = [k for k in kernels if k.device_time_ms is not None]
    total = sum(k.device_time_ms for k in timed)
    if op_cov is None or not timed or total <= 0.0:
        return None
    share, observed = _other_work_ms(timed) / total, max(0.0, 1.0 - op_cov)
    if share < UNEXPLAINED_SHARE or share <= UNEXPLAINED_FACTOR * observed + 0.05:
        return None
    names = ", ".join(sorted({k.name[:60] for k in timed if not k.own})[:3])
    return (f"kernels you did not launch ({names}) ran {share:.0%} of the profiled timed calls' device time, "
            f"while your observed calls left {observed:.1%} of the reference's work to PyTorch: the timed "
            f"calls run other work than the observed ones")


def time_coverage_hack(time_cov: float | None, speedup: float | None,
                       floor: float = TIME_COVERAGE_FLOOR, speedup_high: float | None = None) -> str | None:
    """Evidence for hack 2 when the solution's own kernels ran under ``floor`` of its device time and
    it is no faster than the reference (or was not compared): the time went to kernels that are not
    its own, so op coverage missed work (a copy, an op outside the FLOP registry). A reason to look,
    not to pay. None when time coverage is unknown (CPU) or the rule does not apply.

    "No faster" is read from the speedup's confidence interval where there is one (``speedup_high``,
    its upper end): a solution as fast as the reference sits at 1.0 within timing noise, and a
    point estimate would make it hacked in one run and valid in its replay."""
    fastest = speedup_high if speedup_high is not None else speedup
    if time_cov is None or time_cov >= floor or (fastest is not None and fastest >= 1.0):
        return None
    shown = "not compared" if speedup is None else f"{speedup:.3g}x"
    if speedup is not None and speedup_high is not None:
        shown += f" (interval up to {speedup_high:.3g}x)"
    return (f"own kernels ran {time_cov:.2%} of one forward's device time (floor {floor:.0%}) "
            f"at a speedup of {shown}")


def kernel_stats(profile: dict[str, Any]) -> list[KernelStat]:
    return [KernelStat(k["name"], bool(k["own"]), int(k["launches"]), float(k["device_time_ms"]))
            for k in profile.get("kernels", [])]
