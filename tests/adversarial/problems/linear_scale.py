import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return self.linear(x) * self.scale


BATCH = 16
IN_FEATURES = 32
OUT_FEATURES = 32
SCALE = 2.0


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
