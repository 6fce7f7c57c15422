import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, y_ptr, d1, d2, BLOCK_N: tl.constexpr):
    # Naive: one program per batch element walks D1 one row at a time.
    b = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < d2
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for r in range(0, d1):
        acc += tl.load(x_ptr + (b * d1 + r) * d2 + cols, mask=mask, other=0.0)
    tl.store(y_ptr + b * d2 + cols, acc, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        b, d1, d2 = x.shape
        y = torch.empty((b, 1, d2), device=x.device, dtype=x.dtype)
        sum_dim1_kernel[(b,)](x, y, d1, d2, BLOCK_N=triton.next_power_of_2(d2))
        return y
