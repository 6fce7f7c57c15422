# problem: pair
# Tuple output: one kernel writes both results.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_mul(x_ptr, y_ptr, s_ptr, p_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    y = tl.load(y_ptr + o, mask=m)
    tl.store(s_ptr + o, x + y, mask=m)
    tl.store(p_ptr + o, x * y, mask=m)


class ModelNew(nn.Module):
    def forward(self, x, y):
        s = torch.empty_like(x)
        p = torch.empty_like(x)
        add_mul[(triton.cdiv(x.numel(), 1024),)](x, y, s, p, x.numel(), BLOCK=1024)
        return s, p
