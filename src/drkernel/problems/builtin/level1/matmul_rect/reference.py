"""Rectangular matrix multiplication C = A @ B with A (M, K) and B (K, N)."""

import torch
import torch.nn as nn

M = 4096
K = 1024
N = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
