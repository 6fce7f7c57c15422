# problem: linear_scale
# Lazy: nn.Linear runs in PyTorch, the scale is a Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=m) * s, mask=m)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        h = self.linear(x)
        y = torch.empty_like(h)
        scale_kernel[(triton.cdiv(h.numel(), 512),)](h, y, h.numel(), self.scale, BLOCK=512)
        return y
