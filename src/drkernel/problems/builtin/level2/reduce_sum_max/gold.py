import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_then_partial_max_kernel(x_ptr, part_ptr, C, L, n_tiles_c, BLOCK_C: tl.constexpr, BLOCK_L: tl.constexpr):
    # Grid (B, tiles_c): row sums of a [BLOCK_C, L] slab, then their max; only one float leaves.
    b = tl.program_id(0).to(tl.int64)
    pid_c = tl.program_id(1)
    ch = pid_c * BLOCK_C + tl.arange(0, BLOCK_C)
    cols = tl.arange(0, BLOCK_L)
    base = x_ptr + b * C * L
    acc = tl.zeros((BLOCK_C, BLOCK_L), dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        l = start + cols
        mask = (ch[:, None] < C) & (l[None, :] < L)
        acc += tl.load(base + ch[:, None] * L + l[None, :], mask=mask, other=0.0).to(tl.float32)
    sums = tl.where(ch < C, tl.sum(acc, axis=1), float("-inf"))
    tl.store(part_ptr + b * n_tiles_c + pid_c, tl.max(sums, axis=0))


@triton.jit
def max_kernel(part_ptr, y_ptr, n, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    p = tl.load(part_ptr + b * n + offs, mask=offs < n, other=float("-inf"))
    tl.store(y_ptr + b, tl.max(p, axis=0).to(y_ptr.dtype.element_ty))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        b, c, l = x.shape
        BLOCK_C = 16
        BLOCK_L = min(512, triton.next_power_of_2(l))
        n_tiles_c = triton.cdiv(c, BLOCK_C)
        partial = torch.empty((b, n_tiles_c), device=x.device, dtype=torch.float32)
        sum_then_partial_max_kernel[(b, n_tiles_c)](x, partial, c, l, n_tiles_c, BLOCK_C=BLOCK_C, BLOCK_L=BLOCK_L,
                                                    num_warps=8)
        y = torch.empty((b,), device=x.device, dtype=x.dtype)
        max_kernel[(b,)](partial, y, n_tiles_c, BLOCK=max(2, triton.next_power_of_2(n_tiles_c)), num_warps=1)
        return y
