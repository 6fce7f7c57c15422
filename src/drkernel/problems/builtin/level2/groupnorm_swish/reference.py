"""GroupNorm followed by Swish (x * sigmoid(x)) on an NCHW feature map."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 32
CHANNELS = 128
GROUPS = 16
HEIGHT = 64
WIDTH = 64


class Model(nn.Module):
    def __init__(self, num_groups, num_channels, eps):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_channels))
        self.bias = nn.Parameter(0.1 * torch.randn(num_channels))

    def forward(self, x):
        x = F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) + 1.0]


def get_init_inputs():
    return [GROUPS, CHANNELS, 1e-5]
