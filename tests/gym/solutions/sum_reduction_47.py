"""KernelBench level 1, 47_Sum_reduction_over_a_dimension: sum over dim 1 of (B, D1, D2), keepdim."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, y_ptr, d1, d2, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_mask = cols < d2
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    base = x_ptr + b * d1 * d2
    for start in range(0, d1, BLOCK_R):
        rows = start + tl.arange(0, BLOCK_R)
        mask = (rows[:, None] < d1) & col_mask[None, :]
        acc += tl.load(base + rows[:, None] * d2 + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + b * d2 + cols, tl.sum(acc, axis=0), mask=col_mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        if dim != 1:
            raise ValueError("this kernel reduces over dim 1 of a 3-d input")
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        b, d1, d2 = x.shape
        y = torch.empty((b, 1, d2), device=x.device, dtype=x.dtype)
        BLOCK_C = 128
        sum_dim1_kernel[(b, triton.cdiv(d2, BLOCK_C))](x, y, d1, d2, BLOCK_R=16, BLOCK_C=BLOCK_C, num_warps=4)
        return y
