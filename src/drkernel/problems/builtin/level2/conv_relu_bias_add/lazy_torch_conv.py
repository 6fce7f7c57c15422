import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def relu_bias_kernel(y_ptr, b_ptr, n, hw, c, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.maximum(tl.load(y_ptr + offs, mask=mask), 0.0) + tl.load(b_ptr + (offs // hw) % c, mask=mask)
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(0.1 * torch.randn(out_channels, 1, 1))

    def forward(self, x):
        # The convolution (with its bias) is cuDNN's; Triton only fuses ReLU and the extra bias.
        y = F.conv2d(x, self.conv.weight, self.conv.bias)
        n = y.numel()
        relu_bias_kernel[(triton.cdiv(n, 1024),)](y, self.bias, n, y.shape[2] * y.shape[3], y.shape[1], BLOCK=1024)
        return y
