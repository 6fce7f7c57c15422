"""Depthwise 3x3 convolution (padding 1, with bias) followed by ReLU, as in MobileNet blocks."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 128
HEIGHT = 112
WIDTH = 112


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
