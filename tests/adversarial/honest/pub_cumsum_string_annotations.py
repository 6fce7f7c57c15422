# problem: cumsum
# idiom: tl.cumsum; string annotations and a typed host wrapper
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scan_kernel(X, Y, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0)
    tl.store(Y + row * N + cols, tl.cumsum(x, axis=0), mask=mask)


def cumsum(x: "torch.Tensor", out: Optional["torch.Tensor"] = None) -> "torch.Tensor":
    out = torch.empty_like(x) if out is None else out
    scan_kernel[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cumsum(x.contiguous())
