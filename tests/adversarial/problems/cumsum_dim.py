"""Inclusive prefix sum along the last dimension."""

import torch
import torch.nn as nn

BATCH = 4
DIM = 256


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [1]
