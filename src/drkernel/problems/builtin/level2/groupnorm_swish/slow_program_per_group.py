import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def group_norm_swish_kernel(x_ptr, w_ptr, b_ptr, y_ptr, group_size, hw, channels_per_group, n_groups, eps,
                            BLOCK: tl.constexpr):
    # Naive: one program per (sample, group) walks the whole group three times (N * G programs only).
    group = tl.program_id(0)
    base = group * group_size
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + base + offs, mask=offs < group_size, other=0.0)
    mean = tl.sum(acc, axis=0) / group_size
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, group_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        d = tl.where(offs < group_size, tl.load(x_ptr + base + offs, mask=offs < group_size, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / group_size + eps)
    for start in range(0, group_size, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < group_size
        channel = (group % n_groups) * channels_per_group + offs // hw
        x = tl.load(x_ptr + base + offs, mask=mask, other=0.0)
        h = (x - mean) * rstd * tl.load(w_ptr + channel, mask=mask, other=0.0) + tl.load(b_ptr + channel, mask=mask,
                                                                                         other=0.0)
        tl.store(y_ptr + base + offs, h / (1.0 + tl.exp(-h)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, num_groups, num_channels, eps):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_channels))
        self.bias = nn.Parameter(0.1 * torch.randn(num_channels))

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        g = self.num_groups
        y = torch.empty_like(x)
        group_norm_swish_kernel[(n * g,)](x, self.weight, self.bias, y, (c // g) * h * w, h * w, c // g, g, self.eps,
                                          BLOCK=256, num_warps=4)
        return y
