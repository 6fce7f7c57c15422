# problem: tile
# expect: 2
# default: yes
# redteam: free copies (mechanism 8)
# The repeat is materialised by expand + contiguous (always-allowed ops); the kernel only touches it.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = x.expand(32, x.shape[1]).contiguous()
        touch_kernel[(1,)](y, y.numel(), BLOCK=16)
        return y
