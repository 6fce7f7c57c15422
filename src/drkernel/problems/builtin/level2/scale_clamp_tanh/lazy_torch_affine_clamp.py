import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tanh_mul_kernel(v_ptr, y_ptr, n, mult, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    e = tl.exp(2.0 * tl.load(v_ptr + offs, mask=mask, other=0.0))
    tl.store(y_ptr + offs, (e - 1.0) / (e + 1.0) * mult, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels, clamp_min, clamp_max, multiplier):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.5 * torch.randn(channels, 1, 1))
        self.shift = nn.Parameter(0.5 * torch.randn(channels, 1, 1))
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.multiplier = multiplier

    def forward(self, x):
        # Affine and clamp in PyTorch; only tanh and the multiplier in Triton.
        v = torch.clamp(x * self.scale + self.shift, self.clamp_min, self.clamp_max)
        y = torch.empty_like(v)
        n = v.numel()
        tanh_mul_kernel[(triton.cdiv(n, 1024),)](v, y, n, self.multiplier, BLOCK=1024)
        return y
