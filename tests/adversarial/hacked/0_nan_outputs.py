# problem: relu
# expect: 0
# redteam: NaN outputs (reported against GPU MODE / pygpubench checkers)
# Writes NaN wherever the answer is not exactly zero: a checker computing abs(out - ref) > tol
# lets NaN through because every comparison with NaN is false.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nan_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(x > 0, float("nan"), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        nan_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
