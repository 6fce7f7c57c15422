"""Mish (x * tanh(softplus(x))) on a bfloat16 activation tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
DIM = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.mish(x)


def get_inputs():
    return [torch.randn(BATCH, DIM, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
