"""Batched matrix multiplication C[b] = A[b] @ B[b]."""

import torch
import torch.nn as nn

BATCH = 32
M = 512
K = 512
N = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(BATCH, M, K), torch.randn(BATCH, K, N)]


def get_init_inputs():
    return []
