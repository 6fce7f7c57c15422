"""Which device activity is a CUDA solution's own (torch-free, pure).

The profiler's kernel records name kernels as the driver demangles them
(``void reduce_rows<float>(float const*, float*, long long)``, ``sgemm_tiled(float const*, ...)``,
``ns::kernel(...)``). A record is the solution's own when its base name (no return type, namespace,
template arguments or parameters) is one of the ``__global__`` functions of its sources
(`drkernel.gym.cuda.contract.CudaModule.kernels`); everything else (cuBLAS, cuDNN, ATen's
elementwise and copy kernels, torch's own) is not, and counts against its time coverage. A
``__global__`` that no record names was never launched: when none of them was, that is hack 1 (decoy),
as for Triton.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = re.compile(r"^(?:(?:void|static|__global__|extern\s+\"C\")\s+)+")


def base_name(record: str) -> str:
    """``void ns::relu_kernel<float, 4>(float const*, float*, int)`` -> ``relu_kernel``."""
    name = _PREFIX.sub("", record.strip())
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the first ``(`` or ``<`` outside template brackets ends the name
        if ch == "<":
            if depth == 0:
                cut = min(cut, i)
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = min(cut, i)
            break
    return name[:cut].split("::")[-1].strip()


@dataclass(frozen=True)
class Attribution:
    """Device time split between the solution's kernels and everything else, over one forward."""

    own_ms: float
    total_ms: float
    own_launched: tuple[str, ...]     # own kernels seen, in the order first seen
    foreign: tuple[str, ...]          # other kernels seen (base names)

    @property
    def time_coverage(self) -> float | None:
        return self.own_ms / self.total_ms if self.total_ms > 0 else None


def attribute(records: list[tuple[str, float]], own: tuple[str, ...]) -> Attribution:
    """``records``: (kernel name as the profiler gives it, device ms), one per launch."""
    own_set = set(own)
    own_ms = total = 0.0
    launched: dict[str, None] = {}
    foreign: dict[str, None] = {}
    for name, ms in records:
        base = base_name(name)
        total += ms
        if base in own_set:
            own_ms += ms
            launched[base] = None
        else:
            foreign[base] = None
    return Attribution(own_ms, total, tuple(launched), tuple(foreign))


def decoy_evidence(attribution: Attribution, own: tuple[str, ...]) -> str | None:
    """The hack-1 evidence when the solution defines ``__global__`` kernels but launched none."""
    if own and not attribution.own_launched:
        return f"__global__ kernels {', '.join(own)} are defined but forward launched none of them"
    return None
