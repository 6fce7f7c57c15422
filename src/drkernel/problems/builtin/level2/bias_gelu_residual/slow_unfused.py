import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_bias_kernel(x_ptr, b_ptr, h_ptr, n, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(h_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n_cols, mask=mask), mask=mask)


@triton.jit
def gelu_kernel(h_ptr, g_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    h = tl.load(h_ptr + offs, mask=mask, other=0.0)
    z = h * 0.7071067811865476
    a = tl.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    e = 1.0 - poly * tl.exp(-a * a)
    tl.store(g_ptr + offs, 0.5 * h * (1.0 + tl.where(z >= 0, e, -e)), mask=mask)


@triton.jit
def add_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x, residual):
        # Naive: the same three steps as eager PyTorch, each a separate Triton pass through memory.
        x, residual = x.contiguous(), residual.contiguous()
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        h = torch.empty_like(x)
        add_bias_kernel[grid](x, self.bias, h, n, x.shape[-1], BLOCK=1024)
        g = torch.empty_like(x)
        gelu_kernel[grid](h, g, n, BLOCK=1024)
        y = torch.empty_like(x)
        add_kernel[grid](g, residual, y, n, BLOCK=1024)
        return y
