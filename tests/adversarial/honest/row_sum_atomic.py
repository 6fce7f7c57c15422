# problem: row_sum
# default: yes
# Atomics: column blocks add partial sums into a zero-initialised output (order varies on GPU).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_sum(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cb = tl.program_id(1)
    offs = cb * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.atomic_add(y_ptr + row, tl.sum(v, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.zeros(rows, device=x.device, dtype=torch.float32)
        partial_sum[(rows, triton.cdiv(cols, 64))](x, y, cols, BLOCK=64)
        return y
