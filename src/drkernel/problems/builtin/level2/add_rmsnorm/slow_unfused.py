import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, r_ptr, h_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(h_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(r_ptr + offs, mask=mask), mask=mask)


@triton.jit
def rmsnorm_kernel(h_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # Naive: the sum goes through memory first, then two passes per row in small chunks.
    row = tl.program_id(0)
    base = row * n_cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        h = tl.load(h_ptr + base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += h * h
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        h = tl.load(h_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + cols, (h * rstd * tl.load(w_ptr + cols, mask=mask)).to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x, residual):
        x, residual = x.contiguous(), residual.contiguous()
        h = torch.empty_like(x)
        n = x.numel()
        add_kernel[(triton.cdiv(n, 256),)](x, residual, h, n, BLOCK=256, num_warps=2)
        y = torch.empty_like(x)
        rmsnorm_kernel[(x.shape[0],)](h, self.weight, y, x.shape[1], self.eps, BLOCK=128, num_warps=1)
        return y
