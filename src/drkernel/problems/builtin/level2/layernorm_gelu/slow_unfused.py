import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
    # Naive: one program per row, three passes over global memory in small chunks.
    row = tl.program_id(0)
    base = row * n_cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        d = tl.where(cols < n_cols, tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        h = (x - mean) * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0) + tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(h_ptr + base + cols, h, mask=mask)


@triton.jit
def gelu_kernel(h_ptr, y_ptr, n, BLOCK: tl.constexpr):
    # A second pass through memory; erf from the A&S 7.1.26 polynomial.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(h_ptr + offs, mask=mask, other=0.0)
    z = h * 0.7071067811865476
    a = tl.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    e = 1.0 - poly * tl.exp(-a * a)
    e = tl.where(z >= 0, e, -e)
    tl.store(y_ptr + offs, 0.5 * h * (1.0 + e), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        h = torch.empty_like(x)
        layernorm_kernel[(x.shape[0],)](x, self.weight, self.bias, h, x.shape[1], self.eps, BLOCK=128, num_warps=1)
        y = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 256),)](h, y, n, BLOCK=256, num_warps=2)
        return y
