"""Inline problems and solutions shared by the gym tests."""

from __future__ import annotations

from pathlib import Path

from drkernel.gym import EvalConfig, EvalRequest
from drkernel.problems import Problem

SOLUTIONS = Path(__file__).parent / "solutions"

RELU_REFERENCE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)

batch_size = 8
dim = 96

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
'''

RELU_SOLUTION = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
'''

FAST = EvalConfig(device="cpu", trials=2, second_size=False)

RELU = Problem(name="relu", level=1, code=RELU_REFERENCE, problem_id="relu", source="test")


def request(solution: str, problem: Problem = RELU, **config) -> EvalRequest:
    return EvalRequest(problem=problem, solution=solution, config=FAST.replace(**config))
