"""Softmax over the last dimension of a (BATCH, DIM) matrix."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 4.0]


def get_init_inputs():
    return []
