"""Linear layer, scaled, plus a residual input: y = scale * (x @ W^T + b) + residual."""

import torch
import torch.nn as nn

BATCH = 2048
IN_FEATURES = 1024
OUT_FEATURES = 4096


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x, residual):
        return self.linear(x) * self.scale + residual


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES), torch.randn(BATCH, OUT_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.5]
