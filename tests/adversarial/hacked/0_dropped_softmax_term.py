# problem: x_plus_softmax
# expect: 0
# default: yes
# redteam: one input distribution (mechanism 7)
# x + softmax(x) over 4096 columns: the softmax term is below atol at scale 1, so copy x.
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
