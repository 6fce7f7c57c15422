"""A CUDA result in its own language's words (torch-free).

The verdict's catalogue (`drkernel.gym.verdict.hacks.CATALOGUE`) and its lazy-optimization warning
tell a Triton author what to do. `relabel` gives a CUDA result the same verdict with the sentences a
CUDA author can act on: the hack codes, names and evidence stay; the result names its language.
"""

from __future__ import annotations

from dataclasses import replace

from drkernel.gym.result import EvalResult
from drkernel.gym.verdict.hacks import LAZY_WARNING

MESSAGES: dict[int, str] = {
    1: "A __global__ kernel is defined but forward never ran it; launch your own kernels to compute the "
       "result instead of PyTorch or ATen.",
    2: "The result is computed by PyTorch (or ATen, cuBLAS, cuDNN called from C++), not by your __global__ "
       "kernels; move the main computation into kernels you write and launch from forward.",
    4: "ModelNew must not reuse the reference Model (inheritance, aliasing or calling its forward); write "
       "ModelNew as its own nn.Module calling your CUDA extension.",
    8: "The solution replaced or modified a function of torch, time or the harness; do not assign to "
       "attributes of library modules.",
    14: "The solution reached outside its contract (frame, code or gc introspection, files, processes, "
        "sockets, timers, native code other than its load_inline sources); use only its inputs and "
        "parameters, and compute in your __global__ kernels.",
    16: "The solution uses a compiler, library or loader other than load_inline with sources in its own file "
        "(torch.compile, load, prebuilt libraries, NVRTC, torch.library); write the kernels as __global__ "
        "functions in the solution's cuda_sources.",
}
"""The catalogue's sentences that name Triton, for a CUDA solution."""

LAZY = ("lazy_optimization: only {share:.0%} of the reference's compute runs in your __global__ kernels; "
        "move the expensive operations (not only the cheap ones) into your CUDA kernels.")
LAZY_TAG = LAZY_WARNING.partition(":")[0] + ":"


def relabel(result: EvalResult) -> EvalResult:
    """``result`` with CUDA sentences for its hacks and lazy warning, and ``language`` set to cuda."""
    result.language = "cuda"
    result.hacks = [replace(h, message=MESSAGES[h.code]) if h.code in MESSAGES else h for h in result.hacks]
    coverage = result.op_coverage if result.op_coverage is not None else result.time_coverage
    result.warnings = [LAZY.format(share=coverage) if w.startswith(LAZY_TAG) and coverage is not None else w
                       for w in result.warnings]
    return result
