import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def mul_tanh_kernel(x_ptr, sp_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    e = tl.exp(-2.0 * tl.load(sp_ptr + offs, mask=mask, other=0.0))
    tl.store(y_ptr + offs, (x * (1.0 - e) / (1.0 + e)).to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        # softplus runs in PyTorch; the tanh and the product are the only Triton work.
        sp = F.softplus(x.float())
        y = torch.empty_like(x)
        n = x.numel()
        mul_tanh_kernel[(triton.cdiv(n, 1024),)](x, sp, y, n, BLOCK=1024)
        return y
