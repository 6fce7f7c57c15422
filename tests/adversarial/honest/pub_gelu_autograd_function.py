# problem: gelu
# idiom: the kernel behind a torch.autograd.Function, as training libraries ship it
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def gelu_forward(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    cdf = 0.5 * (1.0 + libdevice.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, x * cdf, mask=mask)


class GeluFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.empty_like(x)
        n = x.numel()
        gelu_forward[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("forward only")


class ModelNew(nn.Module):
    def forward(self, x):
        return GeluFunction.apply(x.contiguous())
