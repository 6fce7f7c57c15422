"""Speed of light: the least time the reference's work can take on a device (torch-free, pure).

Notation: ``F_t`` the reference's FLOPs on tensor cores (fp16/bf16 matmuls), ``F_s`` its other FLOPs
(elementwise, reductions, and fp32 matmuls ``F_m`` among them), ``B`` the bytes any implementation must
move (its inputs read once, its outputs written once), ``P_t``, ``P_s`` the device's dense peak FLOP
rates, ``P_m`` the rate an fp32 matmul may run at under the tolerance profile (TF32 tensor cores where
the profile allows TF32, as ``kernelgym`` does; the fp32 rate where TF32 is hack 12) and ``W`` its peak
memory bandwidth. Then

    roofline_time = max(F_t / P_t + F_m / P_m + (F_s - F_m) / P_s, B / W)
    sol_fraction  = roofline_time / measured_time        (1 = at the speed of light)

as SOL-ExecBench scores kernels. The FLOPs come from the judge's op recorder, counted once per
problem (`drkernel.gym.harness.recorder`, on the nominal H100 of op coverage); an op that recorder
priced compute-bound at the tensor-core rate is a tensor-core op. ``B`` counts no intermediate and
no weight, so the roofline time is a lower bound: a fused kernel may reach it, none beats it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from drkernel.gym.verdict.coverage import OpProfile


@dataclass(frozen=True)
class Peak:
    """A device's dense peak rates: FLOP/s on fp32 and on fp16/bf16 tensor cores, bytes/s of memory."""

    name: str
    fp32_flops: float
    tensor_flops: float
    bandwidth: float

    @property
    def tf32_flops(self) -> float:
        """Dense TF32 tensor-core rate: half the fp16/bf16 rate on these parts."""
        return self.tensor_flops / 2


PEAKS: tuple[tuple[tuple[str, ...], Peak], ...] = (
    # (every substring the device's name must contain, upper case) -> peak; first match wins
    (("H200",), Peak("H200", fp32_flops=67e12, tensor_flops=989e12, bandwidth=4.8e12)),
    (("H100", "PCIE"), Peak("H100 PCIe", fp32_flops=51e12, tensor_flops=756e12, bandwidth=2.0e12)),
    (("H100", "NVL"), Peak("H100 NVL", fp32_flops=60e12, tensor_flops=835e12, bandwidth=3.9e12)),
    (("H100",), Peak("H100 SXM", fp32_flops=67e12, tensor_flops=989e12, bandwidth=3.35e12)),
    (("A100", "80GB"), Peak("A100 80GB", fp32_flops=19.5e12, tensor_flops=312e12, bandwidth=2.039e12)),
    (("A100",), Peak("A100 40GB", fp32_flops=19.5e12, tensor_flops=312e12, bandwidth=1.555e12)),
)
"""NVIDIA's datasheet figures (dense, no sparsity, SXM unless named)."""

NOMINAL_FP32, NOMINAL_TENSOR, NOMINAL_BANDWIDTH = 67e12, 989e12, 3.35e12
"""The op recorder's nominal device (`drkernel.gym.harness.recorder.NOMINAL`), whose prices tell a
tensor-core op from the rest."""


def peak_for(device_name: str) -> Peak | None:
    """The table's peak for a device name (e.g. ``NVIDIA H100 80GB HBM3``); None when unknown (a CPU)."""
    name = device_name.upper()
    for keys, peak in PEAKS:
        if all(k in name for k in keys):
            return peak
    return None


@dataclass(frozen=True)
class Work:
    """The reference's minimal work: FLOPs by unit and the bytes any implementation moves."""

    tensor_flops: float
    other_flops: float
    bytes: float
    matmul32_flops: float = 0.0   # of other_flops: compute-bound fp32 ops (matmuls, convolutions)


def work_of(op_profile: Mapping[str, Sequence[float]], input_bytes: int, output_bytes: int) -> Work:
    """The reference's `Work` from its recorded op profile (``name -> [count, cost_s, flops, bytes]``
    priced on the nominal device) and its inputs' and outputs' sizes."""
    tensor = other = matmul32 = 0.0
    for count, cost, flops, nbytes in OpProfile.from_dict(op_profile).compute_ops().values():
        compute_bound = cost > nbytes / NOMINAL_BANDWIDTH * (1 + 1e-9)
        if compute_bound and flops / cost > 2 * NOMINAL_FP32:  # priced at the tensor-core rate
            tensor += flops
        else:
            other += flops
            matmul32 += flops if compute_bound else 0.0
    return Work(tensor, other, float(input_bytes + output_bytes), matmul32)


def roofline_ms(work: Work, peak: Peak, tf32: bool = False) -> float:
    """``max(F_t / P_t + F_m / P_m + (F_s - F_m) / P_s, B / W)`` in milliseconds; ``tf32``: the
    tolerance profile allows TF32, so ``P_m`` is the TF32 rate (else the fp32 one)."""
    matmul_rate = peak.tf32_flops if tf32 else peak.fp32_flops
    compute = (work.tensor_flops / peak.tensor_flops + work.matmul32_flops / matmul_rate
               + (work.other_flops - work.matmul32_flops) / peak.fp32_flops)
    return max(compute, work.bytes / peak.bandwidth) * 1e3


def sol_fraction(roofline: float | None, measured_ms: float | None) -> float | None:
    """``roofline / measured``; None when either is missing or the measured time is not positive."""
    if roofline is None or measured_ms is None or measured_ms <= 0.0:
        return None
    return roofline / measured_ms
