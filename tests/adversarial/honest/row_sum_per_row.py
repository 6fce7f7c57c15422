# problem: row_sum
# One program per row, the whole row in one block.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0)
    tl.store(y_ptr + row, tl.sum(v, axis=0))


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        y = torch.empty(rows, device=x.device, dtype=x.dtype)
        row_sum_kernel[(rows,)](x, y, cols, BLOCK=triton.next_power_of_2(cols))
        return y
