# problem: softmax
# exp2 with a log2(e) scale, several rows per program.
import torch
import torch.nn as nn
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def softmax_rows(x_ptr, y_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr, L2E: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.arange(0, BC)
    mask = (r[:, None] < rows) & (c[None, :] < cols)
    x = tl.load(x_ptr + r[:, None] * cols + c[None, :], mask=mask, other=-float("inf"))
    x = (x - tl.max(x, axis=1)[:, None]) * L2E
    e = tl.exp2(x)
    tl.store(y_ptr + r[:, None] * cols + c[None, :], e / tl.sum(e, axis=1)[:, None], mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty_like(x)
        softmax_rows[(triton.cdiv(rows, 4),)](x, y, rows, cols, BR=4, BC=triton.next_power_of_2(cols), L2E=LOG2E)
        return y
