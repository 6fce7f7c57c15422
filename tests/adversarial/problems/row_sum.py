import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.sum(dim=1)


ROWS = 64
COLS = 256


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
