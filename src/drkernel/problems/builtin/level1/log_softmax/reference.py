"""LogSoftmax over the last dimension of a (BATCH, DIM) matrix."""

import torch
import torch.nn as nn

BATCH = 8192
DIM = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 4.0]


def get_init_inputs():
    return []
