"""One evaluation per `Status`, on the CPU evaluator (Triton interpreter): every failure is a value
with a useful, trimmed error, and none takes the evaluator down."""

from __future__ import annotations

import re

import pytest

from drkernel.gym import Status
from gym_cases import RELU_SOLUTION, request


def mutate(old: str, new: str) -> str:
    assert old in RELU_SOLUTION
    return RELU_SOLUTION.replace(old, new)


def test_correct(evaluator):
    r = evaluator.evaluate(request(RELU_SOLUTION))
    assert r.status is Status.CORRECT and r.valid and r.correct and r.compiled
    assert [t.passed for t in r.trials] == [True, True]
    assert [t.trial for t in r.trials] == [0, 1]
    assert len({t.seed for t in r.trials}) == 2 and 1 not in {t.seed for t in r.trials}  # secret, not seed + k
    assert r.trials[0].max_abs_err == 0.0
    # atol derived from the reference (its fp64 error, the scale of its output), at most the profile's
    assert 0 < r.atol <= 1e-2 and (r.rtol, r.tolerance_profile) == (1e-2, "kernelgym")
    assert r.backend_flags["cuda.matmul.allow_tf32"] is False
    assert r.device == "cpu" and r.sol_timing is None and r.speedup is None
    assert "interpreter" in r.timing_note
    assert [(k.name, k.own, k.launches) for k in r.kernels] == [("relu_kernel", True, 1)]
    assert {"child_start", "inputs", "import", "compile", "correctness"} <= set(r.stage_seconds)
    assert r.error is None


def test_incorrect_names_the_first_bad_value(evaluator):
    r = evaluator.evaluate(request(mutate("tl.maximum(x, 0.0)", "x")))
    assert r.status is Status.INCORRECT and not r.valid and r.compiled
    assert r.trials[0].passed is False and len(r.trials) == 1  # stops at the first failing trial
    assert re.search(r"outside atol=[0-9.e-]+ rtol=0\.01", r.error) and "trial 0" in r.error


def test_wrong_shape_is_incorrect(evaluator):
    r = evaluator.evaluate(request(mutate("return y", "return y[:4]")))
    assert r.status is Status.INCORRECT
    assert "shape (4, 96), expected (8, 96)" in r.error


def test_nan_is_incorrect(evaluator):
    r = evaluator.evaluate(request(mutate("return y", "y[0, 0] = float('nan')\n        return y")))
    assert r.status is Status.INCORRECT and "NaN" in r.error


def test_syntax_error(evaluator):
    r = evaluator.evaluate(request(mutate("def forward(self, x):", "def forward(self, x:")))
    assert r.status is Status.SYNTAX_ERROR and r.compiled is False
    assert "SyntaxError" in r.error and "solution.py" in r.error


def test_no_modelnew(evaluator):
    r = evaluator.evaluate(request(mutate("class ModelNew", "class Model2")))
    assert r.status is Status.NO_MODELNEW and "ModelNew" in r.error


def test_constructor_signature_mismatch(evaluator):
    r = evaluator.evaluate(request(mutate("def __init__(self):", "def __init__(self, channels):")))
    assert r.status is Status.SIGNATURE_MISMATCH and "ModelNew()" in r.error


def test_forward_signature_mismatch(evaluator):
    r = evaluator.evaluate(request(mutate("def forward(self, x):", "def forward(self, x, y):")))
    assert r.status is Status.SIGNATURE_MISMATCH and "forward(Tensor(8, 96))" in r.error


def test_import_error(evaluator):
    # An allowed module, a name it lacks (a module outside the contract is rejected before running).
    r = evaluator.evaluate(request("from torch.nn import definitely_not_a_module_xyz\n" + RELU_SOLUTION))
    assert r.status is Status.IMPORT_ERROR
    assert "definitely_not_a_module_xyz" in r.error and "drkernel/gym" not in r.error


def test_compile_error(evaluator):
    r = evaluator.evaluate(request(mutate("tl.arange(0, BLOCK)", "tl.arange(0, BLOCK - 1)")))
    assert r.status is Status.COMPILE_ERROR and r.compiled is False
    assert "power of 2" in r.error


def test_runtime_error_keeps_the_solutions_frame(evaluator):
    r = evaluator.evaluate(request(mutate("y = torch.empty_like(x)", "y = torch.empty_like(x) @ x")))
    assert r.status is Status.RUNTIME_ERROR and r.compiled
    assert "solution.py" in r.error and "y = torch.empty_like(x) @ x" in r.error
    assert len(r.error) <= 2000 and "drkernel/gym/candidate/main.py" not in r.error


def test_out_of_bounds_store_is_caught(evaluator):
    r = evaluator.evaluate(request(mutate("tl.store(y_ptr + offs,", "tl.store(y_ptr + offs + 8,")))
    assert r.status is Status.RUNTIME_ERROR and "out-of-bounds store" in r.error


POINTER_ARRAY_RELU = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(addrs, n, BLOCK: tl.constexpr):
    x_ptr = tl.load(addrs).to(tl.pointer_type(tl.float32))
    y_ptr = tl.load(addrs + 1).to(tl.pointer_type(tl.float32))
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        addrs = torch.tensor([x.data_ptr(), y.data_ptr() + SHIFT], dtype=torch.int64, device=x.device)
        relu_kernel[(triton.cdiv(x.numel(), 256),)](addrs, x.numel(), BLOCK=256)
        return y
"""


def test_addresses_loaded_from_a_tensor_reach_the_tensors_they_were_taken_from(evaluator):
    """A kernel that loads its matrices' addresses from a tensor (Triton's grouped GEMM) is checked
    against the storages whose address the solution took: those pass, an address past them is still
    an out-of-bounds access, as on a GPU."""
    ok = evaluator.evaluate(request(POINTER_ARRAY_RELU.replace("SHIFT", "0")))
    assert ok.status is Status.CORRECT and ok.valid, ok.error
    stray = evaluator.evaluate(request(POINTER_ARRAY_RELU.replace("SHIFT", "(1 << 24)")))
    assert stray.status is Status.RUNTIME_ERROR and "out-of-bounds store" in stray.error


def test_a_forward_failing_only_at_the_second_size_says_so(evaluator):
    """Correct at (8, 96), a hard-coded shape fails at the hidden second size: the error names it."""
    r = evaluator.evaluate(request(mutate("y = torch.empty_like(x)",
                                          "y = torch.empty_like(x)\n        assert x.shape == (8, 96), 'tiles of 8 x 96'"),
                                   second_size=True))
    assert r.status is Status.RUNTIME_ERROR and [t.passed for t in r.trials] == [True, True]
    assert "tiles of 8 x 96" in r.error and "(the forward failed at the second problem size (inputs (" in r.error


def test_timeout(evaluator):
    r = evaluator.evaluate(request(mutate("y = torch.empty_like(x)", "while True:\n            pass"),
                                   timeout_s=4.0))
    assert r.status is Status.TIMEOUT and "time limit of 4 s" in r.error
    assert r.elapsed_s < 30


@pytest.mark.parametrize("body, expect", [
    ("import os\n        os._exit(3)", "exited with code 3"),
    ("import ctypes\n        ctypes.string_at(0)", "SIGSEGV"),
])
def test_crashed(boundary_only_evaluator, body, expect):
    # os._exit and ctypes are hacks under the default checks (rejected before running); with the
    # trust boundary alone they must still end as a `crashed` result, not take the caller down.
    r = boundary_only_evaluator.evaluate(request(mutate("y = torch.empty_like(x)", body)))
    assert r.status is Status.CRASHED and expect in r.error


def test_out_of_memory_by_resident_size_watch(evaluator):
    r = evaluator.evaluate(request(mutate("y = torch.empty_like(x)",
                                          "hog = bytearray(3 << 30)\n        y = torch.empty_like(x)"),
                                   rss_limit_mb=2048))
    assert r.status is Status.OUT_OF_MEMORY and "2048 MB" in r.error


def _with_libdevice(expr: str) -> str:
    return mutate("tl.maximum(x, 0.0)", expr).replace(
        "import triton.language as tl", "import triton.language as tl\nfrom triton.language.extra import libdevice")


def test_libdevice_is_judged_on_cpu_as_on_the_gpu(evaluator):
    # the interpreter is given libdevice's functions: the verdict is the GPU's, not "unsupported"
    assert evaluator.evaluate(request(_with_libdevice("libdevice.fmax(x, 0.0)"))).status is Status.CORRECT
    assert evaluator.evaluate(request(_with_libdevice("libdevice.tanh(x)"))).status is Status.INCORRECT


def test_unsupported_on_cpu_for_inline_asm(evaluator):
    asm = 'tl.inline_asm_elementwise("max.f32 $0, $1, 0f00000000;", "=r,r", [x], dtype=tl.float32, is_pure=True, pack=1)'
    r = evaluator.evaluate(request(mutate("tl.maximum(x, 0.0)", asm)))
    assert r.status is Status.UNSUPPORTED_ON_CPU, (r.status, r.error)


def test_the_evaluator_survives_all_of_the_above(evaluator):
    assert evaluator.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
    info = evaluator.device_info()
    assert info["device"] == "cpu" and info["in_flight"] == 0 and info["pool_size"] == 2
