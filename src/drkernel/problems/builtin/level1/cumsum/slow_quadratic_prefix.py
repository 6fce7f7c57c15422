import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # Naive: each chunk re-sums every element before it from global memory (quadratic work).
    row = tl.program_id(0)
    base = row * n_cols
    cols = tl.arange(0, BLOCK)
    for start in range(0, n_cols, BLOCK):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for prev in range(0, start, BLOCK):
            acc += tl.load(x_ptr + base + prev + cols)
        c = start + cols
        mask = c < n_cols
        x = tl.load(x_ptr + base + c, mask=mask, other=0.0)
        tl.store(y_ptr + base + c, tl.cumsum(x, axis=0) + tl.sum(acc, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        BLOCK = 64
        assert x.shape[1] % BLOCK == 0
        cumsum_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=BLOCK)
        return y
