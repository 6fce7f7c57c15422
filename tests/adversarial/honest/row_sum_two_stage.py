# problem: row_sum
# Two stages: partial sums into a temporary (zeroed in place), then a second kernel reduces them.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def stage1(x_ptr, part_ptr, cols, NB: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cb = tl.program_id(1)
    offs = cb * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(part_ptr + row * NB + cb, tl.sum(v, axis=0))


@triton.jit
def stage2(part_ptr, y_ptr, NB: tl.constexpr):
    row = tl.program_id(0)
    p = tl.load(part_ptr + row * NB + tl.arange(0, NB))
    tl.store(y_ptr + row, tl.sum(p, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        nb = triton.next_power_of_2(triton.cdiv(cols, 64))
        part = torch.empty(rows, nb, device=x.device, dtype=torch.float32)
        part.zero_()
        stage1[(rows, triton.cdiv(cols, 64))](x, part, cols, NB=nb, BLOCK=64)
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        stage2[(rows,)](part, y, NB=nb)
        return y
