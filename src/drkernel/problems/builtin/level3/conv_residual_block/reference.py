"""A ResNet basic block without batch norm: conv3x3-ReLU-conv3x3, identity shortcut, ReLU."""

import torch
import torch.nn as nn

BATCH = 16
CHANNELS = 64
HEIGHT = 56
WIDTH = 56


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        out = torch.relu(self.conv1(x))
        return torch.relu(self.conv2(out) + x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
