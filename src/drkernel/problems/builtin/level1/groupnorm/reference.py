"""GroupNorm over an NCHW feature map with learned per-channel scale and shift."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
CHANNELS = 64
GROUPS = 8
HEIGHT = 128
WIDTH = 128


class Model(nn.Module):
    def __init__(self, num_groups, num_channels, eps):
        super().__init__()
        self.num_groups = num_groups
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(num_channels))
        self.bias = nn.Parameter(0.1 * torch.randn(num_channels))

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH) + 1.0]


def get_init_inputs():
    return [GROUPS, CHANNELS, 1e-5]
