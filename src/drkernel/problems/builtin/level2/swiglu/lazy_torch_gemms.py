import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_mul_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, a / (1.0 + tl.exp(-a)) * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        # Both GEMMs are cuBLAS's; Triton only does the SiLU and the product.
        a = torch.matmul(x, self.w1.weight.t())
        b = torch.matmul(x, self.w3.weight.t())
        y = torch.empty_like(a)
        n = y.numel()
        silu_mul_kernel[(triton.cdiv(n, 1024),)](a, b, y, n, BLOCK=1024)
        return y
