import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + torch.softmax(x, dim=1)


ROWS = 4
COLS = 4096


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
