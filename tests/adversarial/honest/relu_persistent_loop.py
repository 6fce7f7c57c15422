# problem: relu
# One program loops over all blocks (a persistent-style kernel).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_loop(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = 1024

    def forward(self, x):
        y = torch.empty_like(x)
        relu_loop[(1,)](x, y, x.numel(), BLOCK=self.block)
        return y
