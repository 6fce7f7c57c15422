import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_cast_kernel(h_ptr, w_ptr, y_ptr, n, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(h_ptr + offs, mask=mask) * tl.load(w_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, y.to(tl.float16), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x, residual):
        # The add and the normalisation are PyTorch's; Triton only applies the weight and casts.
        hf = (x + residual).float()
        h = (hf * torch.rsqrt(hf.pow(2).mean(dim=-1, keepdim=True) + self.eps)).contiguous()
        y = torch.empty_like(x)
        n = y.numel()
        scale_cast_kernel[(triton.cdiv(n, 1024),)](h, self.weight, y, n, y.shape[-1], BLOCK=1024)
        return y
