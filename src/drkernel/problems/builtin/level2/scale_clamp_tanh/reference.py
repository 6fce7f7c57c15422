"""Per-channel affine, clamp, tanh and a constant multiplier on an NCHW tensor."""

import torch
import torch.nn as nn

BATCH = 32
CHANNELS = 64
HEIGHT = 128
WIDTH = 128


class Model(nn.Module):
    def __init__(self, channels, clamp_min, clamp_max, multiplier):
        super().__init__()
        self.scale = nn.Parameter(1.0 + 0.5 * torch.randn(channels, 1, 1))
        self.shift = nn.Parameter(0.5 * torch.randn(channels, 1, 1))
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max
        self.multiplier = multiplier

    def forward(self, x):
        x = torch.clamp(x * self.scale + self.shift, self.clamp_min, self.clamp_max)
        return torch.tanh(x) * self.multiplier


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, -1.5, 1.0, 2.0]
