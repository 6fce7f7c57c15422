"""A problem whose reference returns fp8 (a quantiser's output) is judged: the judge reads fp8 values
as float32 (torch has no fp8 ``isfinite``; before, such a problem could not be prepared at all), and
an fp8 output's relative tolerance is one step of its mantissa (`config.FP8_RTOL`: two honest kernels
that scale in another order round a step apart), so a quantiser that scales wrongly still fails."""

from __future__ import annotations

import pytest
import torch
from gym_cases import request

from drkernel.gym import Status
from drkernel.gym.config import tolerance_for
from drkernel.problems.problem import Problem

FP8_SCALE = Problem(name="fp8_scale", level=1, source="test", code="""
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def forward(self, x):
        return (x * 2.0).to(torch.float8_e4m3fn)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
""")

SOLUTION = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * FACTOR, mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        scale_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y.to(torch.float8_e4m3fn)
"""


@pytest.mark.parametrize("factor, correct", [("2.0", True), ("1.5", False)])
def test_an_fp8_output_is_judged_and_a_wrong_scale_fails(evaluator, factor, correct):
    r = evaluator.evaluate(request(SOLUTION.replace("FACTOR", factor), FP8_SCALE))
    assert r.status is (Status.CORRECT if correct else Status.INCORRECT), (r.status, r.error)
    assert r.correct is correct


def test_an_fp8_output_s_relative_tolerance_is_one_step_of_its_mantissa():
    for profile in ("kernelgym", "kernelbench"):
        assert tolerance_for(profile, "float8_e4m3fn")[1] == 2.0**-3 == torch.finfo(torch.float8_e4m3fn).eps
        assert tolerance_for(profile, "float8_e5m2")[1] == 2.0**-2 == torch.finfo(torch.float8_e5m2).eps
        assert tolerance_for(profile, "float32") == tolerance_for(profile, "float64")  # others unchanged
