import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_lastdim_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # Each program reduces BLOCK_R contiguous rows; one reduction at the end of the column loop.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    acc = tl.zeros((BLOCK_R, BLOCK_C), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        c = start + cols
        mask = (rows[:, None] < n_rows) & (c[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * n_cols + c[None, :], mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=1) / n_cols
    tl.store(y_ptr + rows, mean.to(y_ptr.dtype.element_ty), mask=rows < n_rows)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim in (-1, x.dim() - 1)
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        y = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        BLOCK_R = 16
        BLOCK_C = min(256, triton.next_power_of_2(n_cols))
        mean_lastdim_kernel[(triton.cdiv(n_rows, BLOCK_R),)](x, y, n_rows, n_cols, BLOCK_R=BLOCK_R,
                                                             BLOCK_C=BLOCK_C, num_warps=4)
        return y
