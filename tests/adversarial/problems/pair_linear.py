"""Linear layer returning both the pre-activation and the ReLU output (a tuple output, as
KernelBench's RNN/attention problems that return (output, state) do)."""

import torch
import torch.nn as nn

BATCH = 32
IN_FEATURES = 64
OUT_FEATURES = 48


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = self.linear(x)
        return (torch.relu(y), y)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
