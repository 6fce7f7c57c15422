import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7), built from tl.exp.
    a = tl.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * tl.exp(-a * a)
    return tl.where(x >= 0, y, -y)


@triton.jit
def layernorm_gelu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    h = xc * rstd * w + b
    y = 0.5 * h * (1.0 + _erf(h * 0.7071067811865476))
    tl.store(y_ptr + row * row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        num_warps = min(16, max(4, BLOCK // 512))
        layernorm_gelu_kernel[(n_rows,)](x, self.weight, self.bias, y, n_cols, x.stride(0), self.eps, BLOCK=BLOCK,
                                         num_warps=num_warps)
        return y
