# problem: row_sum
# Accumulates in fp64 inside the kernel (higher precision is fine), stores fp32.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum64(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0).to(tl.float64)
    tl.store(y_ptr + row, tl.sum(v, axis=0).to(tl.float32))


class ModelNew(nn.Module):
    def forward(self, x):
        y = x.new_empty(x.shape[0])
        sum64[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
