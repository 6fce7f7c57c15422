import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    # One program per row: scan a chunk with tl.cumsum, carry the running total to the next chunk.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    carry = 0.0
    for start in range(0, n_cols, BLOCK):
        c = start + cols
        mask = c < n_cols
        x = tl.load(x_ptr + row * row_stride + c, mask=mask, other=0.0).to(tl.float32)
        s = tl.cumsum(x, axis=0) + carry
        tl.store(y_ptr + row * row_stride + c, s.to(y_ptr.dtype.element_ty), mask=mask)
        carry += tl.sum(x, axis=0)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim in (1, -1) and x.dim() == 2
        x = x.contiguous()
        y = torch.empty_like(x)
        BLOCK = min(1024, triton.next_power_of_2(x.shape[1]))
        cumsum_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=BLOCK, num_warps=4)
        return y
