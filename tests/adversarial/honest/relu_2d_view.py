# problem: relu
# Reshapes the input to 2-D (views are bookkeeping) and runs a 2-D grid.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu2d(x_ptr, y_ptr, rows, cols, BR: tl.constexpr, BC: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)[:, None]
    c = tl.program_id(1) * BC + tl.arange(0, BC)[None, :]
    mask = (r < rows) & (c < cols)
    v = tl.load(x_ptr + r * cols + c, mask=mask)
    tl.store(y_ptr + r * cols + c, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x2 = x.view(64, -1)
        y2 = torch.empty_like(x2)
        relu2d[(triton.cdiv(64, 16), triton.cdiv(x2.shape[1], 32))](x2, y2, 64, x2.shape[1], BR=16, BC=32)
        return y2.view(x.shape)
