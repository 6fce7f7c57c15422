# problem: pair
# expect: 6
# Subtle: edits a single element of the second input after computing.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def both(x_ptr, y_ptr, s_ptr, p_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    x = tl.load(x_ptr + o, mask=m)
    y = tl.load(y_ptr + o, mask=m)
    tl.store(s_ptr + o, x + y, mask=m)
    tl.store(p_ptr + o, x * y, mask=m)
    tl.store(y_ptr + o, y + 1.0, mask=o == 3)


class ModelNew(nn.Module):
    def forward(self, x, y):
        s, p = torch.empty_like(x), torch.empty_like(x)
        both[(triton.cdiv(x.numel(), 1024),)](x, y, s, p, x.numel(), BLOCK=1024)
        return s, p
