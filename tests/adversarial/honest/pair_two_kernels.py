# problem: pair
# Tuple output from two kernels, returned as a tuple built from a list.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_k(a, b, c, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(c + o, tl.load(a + o, mask=m) + tl.load(b + o, mask=m), mask=m)


@triton.jit
def mul_k(a, b, c, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(c + o, tl.load(a + o, mask=m) * tl.load(b + o, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, x, y):
        outs = []
        for kern in (add_k, mul_k):
            out = torch.empty_like(x)
            kern[(triton.cdiv(x.numel(), 512),)](x, y, out, x.numel(), BLOCK=512)
            outs.append(out)
        return tuple(outs)
