import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


N = 4096


def get_inputs():
    return [torch.randn(N, dtype=torch.float16), torch.randn(N, dtype=torch.float16)]


def get_init_inputs():
    return []
