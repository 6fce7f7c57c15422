"""Max over the middle dimension of a 3D tensor (values only)."""

import torch
import torch.nn as nn

BATCH = 128
DIM1 = 1024
DIM2 = 512


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.max(x, dim=self.dim).values


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [1]
