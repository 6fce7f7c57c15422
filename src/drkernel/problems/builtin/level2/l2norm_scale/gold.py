import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def l2norm_scale_kernel(x_ptr, s_ptr, y_ptr, n_cols, row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    norm = tl.maximum(tl.sqrt(tl.sum(x * x, axis=0)), 1e-12)
    s = tl.load(s_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * row_stride + cols, (x / norm * s).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, gain):
        super().__init__()
        self.scale = nn.Parameter(gain * (1.0 + 0.1 * torch.randn(dim)))

    def forward(self, x):
        x = x.contiguous()
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        BLOCK = triton.next_power_of_2(n_cols)
        num_warps = min(16, max(4, BLOCK // 512))
        l2norm_scale_kernel[(n_rows,)](x, self.scale, y, n_cols, x.stride(0), BLOCK=BLOCK, num_warps=num_warps)
        return y
