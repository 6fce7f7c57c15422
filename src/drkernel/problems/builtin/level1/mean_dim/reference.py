"""Mean over the last dimension of a 3D tensor."""

import torch
import torch.nn as nn

BATCH = 128
DIM1 = 512
DIM2 = 1024


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [-1]
