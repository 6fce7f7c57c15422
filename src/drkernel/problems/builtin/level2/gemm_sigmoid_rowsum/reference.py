"""Linear layer, sigmoid, then a sum over the features: y = sum_j sigmoid(x @ W^T + b)[:, j]."""

import torch
import torch.nn as nn

BATCH = 4096
IN_FEATURES = 1024
OUT_FEATURES = 2048


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
