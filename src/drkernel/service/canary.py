"""The canary: a known-good evaluation run on a device when its worker starts and after a crash,
timeout or infrastructure failure there. If it does not come back correct and valid, the device
leaves service (a faulted GPU, a broken driver, a wedged judge) and is reported."""

from __future__ import annotations

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.gym.result import EvalResult, Status
from drkernel.problems.problem import Problem

CANARY_REFERENCE = '''
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(N), torch.randn(N)]


def get_init_inputs():
    return []
'''

CANARY_SOLUTION = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(x + y, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        out = torch.empty_like(x)
        n = x.numel()
        add_relu_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
'''

CANARY_PROBLEM = Problem(name="canary_add_relu", level=1, code=CANARY_REFERENCE, problem_id="canary",
                         source="service")


def canary_request() -> EvalRequest:
    """A small known-good request; timing off so it is quick and never waits for the timing lock."""
    return EvalRequest(problem=CANARY_PROBLEM, solution=CANARY_SOLUTION,
                       config=EvalConfig(trials=2, timing=False, profile=False, second_size=False, timeout_s=120.0),
                       request_id="canary")


def canary_passed(result: EvalResult) -> tuple[bool, str]:
    """Whether the canary came back correct and valid, and a reason when not."""
    if result.status is Status.CORRECT and result.valid:
        return True, ""
    return False, f"canary came back {result.status.value}" + (f": {result.error}" if result.error else "")
