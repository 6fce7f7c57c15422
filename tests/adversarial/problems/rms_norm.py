import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)


ROWS = 32
COLS = 256


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [1e-6]
