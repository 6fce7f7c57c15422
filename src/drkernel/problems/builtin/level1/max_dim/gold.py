import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def max_dim1_kernel(x_ptr, y_ptr, d1, d2, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_R)
    base = x_ptr + b * d1 * d2
    acc = tl.full((BLOCK_R, BLOCK_N), float("-inf"), dtype=tl.float32)
    for start in range(0, d1, BLOCK_R):
        r = start + rows
        mask = (r[:, None] < d1) & (cols[None, :] < d2)
        x = tl.load(base + r[:, None] * d2 + cols[None, :], mask=mask, other=float("-inf"))
        acc = tl.maximum(acc, x.to(tl.float32))
    tl.store(y_ptr + b * d2 + cols, tl.max(acc, axis=0).to(y_ptr.dtype.element_ty), mask=cols < d2)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        b, d1, d2 = x.shape
        y = torch.empty((b, d2), device=x.device, dtype=x.dtype)
        BLOCK_N = min(128, triton.next_power_of_2(d2))
        max_dim1_kernel[(b, triton.cdiv(d2, BLOCK_N))](x, y, d1, d2, BLOCK_R=32, BLOCK_N=BLOCK_N, num_warps=4)
        return y
