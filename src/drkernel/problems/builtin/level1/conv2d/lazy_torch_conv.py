import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def add_bias_kernel(y_ptr, b_ptr, n, hw, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    ch = (offs // hw) % c
    y = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + ch, mask=mask)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        # The convolution is cuDNN's; Triton only adds the bias.
        y = F.conv2d(x, self.conv.weight, None, padding=self.conv.padding)
        n = y.numel()
        add_bias_kernel[(triton.cdiv(n, 1024),)](y, self.conv.bias, n, y.shape[2] * y.shape[3], y.shape[1],
                                                 BLOCK=1024)
        return y
