"""Softplus (beta = 1, threshold = 20) applied elementwise."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 4096
DIM = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 8.0]


def get_init_inputs():
    return []
