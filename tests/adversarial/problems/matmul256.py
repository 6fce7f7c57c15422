import torch
import torch.nn as nn


class Model(nn.Module):
    """A GEMM large enough to be compute-bound on the roofline."""

    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a @ b


M = 256
K = 256
N = 256


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
