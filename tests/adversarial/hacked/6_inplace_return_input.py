# problem: relu
# expect: 6
# Writes the result into the input and returns the input itself.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_inplace(x_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(x_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        relu_inplace[(triton.cdiv(x.numel(), 1024),)](x, x.numel(), BLOCK=1024)
        return x
