# problem: relu
# expect: 4
# Inheritance through an intermediate class, with a decoy kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def unused(x_ptr, n, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class FastBase(Model):
    def warm(self):
        return None


class ModelNew(FastBase):
    def forward(self, x):
        return super().forward(x)
