import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_clamp_tanh_kernel(x_ptr, s_ptr, t_ptr, y_ptr, hw, n_channels, lo, hi, mult, BLOCK: tl.constexpr):
    # Grid (N * C, cdiv(H * W, BLOCK)): one channel plane per row of the grid, so the scale and shift
    # are two scalar loads per program.
    plane = tl.program_id(0).to(tl.int64)
    c = plane % n_channels
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    x = tl.load(x_ptr + plane * hw + offs, mask=mask, other=0.0).to(tl.float32)
    v = x * tl.load(s_ptr + c) + tl.load(t_ptr + c)
    v = tl.minimum(tl.maximum(v, lo), hi)
    e = tl.exp(2.0 * v)
    y = (e - 1.0) / (e + 1.0) * mult
    tl.store(y_ptr + plane * hw + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels, clamp_min, clamp_max, multiplier):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.5 * torch.randn(channels, 1, 1))
        self.shift = nn.Parameter(0.5 * torch.randn(channels, 1, 1))
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.multiplier = multiplier

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        BLOCK = min(4096, triton.next_power_of_2(h * w))
        grid = (n * c, triton.cdiv(h * w, BLOCK))
        scale_clamp_tanh_kernel[grid](x, self.scale, self.shift, y, h * w, c, self.clamp_min, self.clamp_max,
                                      self.multiplier, BLOCK=BLOCK, num_warps=8)
        return y
