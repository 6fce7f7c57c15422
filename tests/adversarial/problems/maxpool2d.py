"""2D max pooling, kernel 3, stride 2, padding 1 (a ResNet stem pool), NCHW."""

import torch
import torch.nn as nn

BATCH = 1
CHANNELS = 4
HEIGHT = 16
WIDTH = 16


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [3, 2, 1]
