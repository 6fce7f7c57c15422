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
def bias_gelu_residual_kernel(x_ptr, b_ptr, r_ptr, y_ptr, n_rows, n_cols,
                              BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # 2D tiles so the bias is loaded once per column block instead of gathered per element.
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    offs = rows[:, None] * n_cols + cols[None, :]
    h = tl.load(x_ptr + offs, mask=mask, other=0.0) + tl.load(b_ptr + cols, mask=cols < n_cols, other=0.0)[None, :]
    g = 0.5 * h * (1.0 + _erf(h * 0.7071067811865476))
    y = g + tl.load(r_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x, residual):
        x, residual = x.contiguous(), residual.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        y = torch.empty_like(x)
        BLOCK_R, BLOCK_C = 8, min(512, triton.next_power_of_2(n_cols))
        grid = (triton.cdiv(n_rows, BLOCK_R), triton.cdiv(n_cols, BLOCK_C))
        bias_gelu_residual_kernel[grid](x, self.bias, residual, y, n_rows, n_cols, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C,
                                        num_warps=8)
        return y
