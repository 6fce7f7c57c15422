import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine_kernel(x_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    y = (x - tl.load(mean_ptr + row)) * tl.load(rstd_ptr + row) * w + b
    tl.store(y_ptr + row * n_cols + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        # The statistics come from PyTorch; Triton only applies the normalisation.
        x = x.contiguous()
        mean = x.mean(dim=1)
        rstd = torch.rsqrt(x.var(dim=1, unbiased=False) + self.eps)
        y = torch.empty_like(x)
        affine_kernel[(x.shape[0],)](x, mean, rstd, self.weight, self.bias, y, x.shape[1],
                                     BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
