# problem: swiglu
# idiom: sigmoid written with libdevice's exp, the program id cast to int64 for large tensors
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def swiglu_fwd(A, B, C, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=0.0)
    b = tl.load(B + offs, mask=mask, other=0.0)
    tl.store(C + offs, a / (1.0 + libdevice.exp(-a)) * b, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        swiglu_fwd[(triton.cdiv(a.numel(), 2048),)](a, b, c, a.numel(), BLOCK=2048)
        return c
