# problem: softmax
# default: yes
# Numerically stable softmax, one row per program.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        softmax_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
