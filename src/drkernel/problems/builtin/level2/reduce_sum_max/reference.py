"""Reduction chain: sum over the last dimension, then max over channels."""

import torch
import torch.nn as nn

BATCH = 64
CHANNELS = 1024
LENGTH = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=2).max(dim=1).values


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, LENGTH)]


def get_init_inputs():
    return []
