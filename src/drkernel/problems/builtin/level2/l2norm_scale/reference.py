"""Row-wise L2 normalisation followed by a learned per-feature scale."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8192
DIM = 4096


class Model(nn.Module):
    def __init__(self, dim, gain):
        super().__init__()
        self.scale = nn.Parameter(gain * (1.0 + 0.1 * torch.randn(dim)))

    def forward(self, x):
        return F.normalize(x, p=2.0, dim=1) * self.scale


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    # gain = sqrt(DIM) keeps outputs O(1), so the tolerance is meaningful.
    return [DIM, DIM ** 0.5]
