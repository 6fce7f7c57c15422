import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    r = tl.load(r_ptr + row * row_stride + cols, mask=mask, other=0.0)
    h = (x + r).to(tl.float32)  # fp16 + fp16 rounds to fp16, as in the reference
    rstd = 1.0 / tl.sqrt(tl.sum(h * h, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * row_stride + cols, (h * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x, residual):
        x = x.contiguous()
        residual = residual.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        num_warps = min(16, max(4, BLOCK // 1024))
        add_rmsnorm_kernel[(n_rows,)](x, residual, self.weight, y, n_cols, x.stride(0), self.eps, BLOCK=BLOCK,
                                      num_warps=num_warps)
        return y
