# problem: linear_scale
# expect: 2
# Everything in PyTorch except adding zero in Triton: own kernels do under 10% of the compute.
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def add_zero(x_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + o, tl.load(x_ptr + o, mask=o < n) + 0.0, mask=o < n)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = F.linear(x, self.linear.weight, self.linear.bias) * self.scale
        add_zero[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), BLOCK=1024)
        return y
