import torch
import torch.nn as nn


class Model(nn.Module):
    """Row means of a hundredth of the input: every value is far below a fixed atol of 1e-2."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.mean(x, dim=1) * 0.01


ROWS = 64
COLS = 4096


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
