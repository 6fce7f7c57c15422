"""SwiGLU feed-forward gate: silu(x @ W1^T) * (x @ W3^T), as in LLaMA's MLP (without the down projection)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 2048
DIM = 1024
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return F.silu(self.w1(x)) * self.w3(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
