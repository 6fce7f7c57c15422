"""LayerNorm over the last dimension with learned scale and shift."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
DIM = 512


class Model(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        # Random affine parameters, so that a solution ignoring them is caught.
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(BATCH, DIM) * 2.0 + 0.5]


def get_init_inputs():
    return [DIM, 1e-5]
