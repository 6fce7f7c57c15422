import torch
import torch.nn as nn


class Model(nn.Module):
    """C = tril(A @ B) for lower-triangular A and B (KernelBench level 1, problem 15, at a small size)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


M = 96


def get_inputs():
    A = torch.tril(torch.rand(M, M))
    B = torch.tril(torch.rand(M, M))
    return [A, B]


def get_init_inputs():
    return []
