# problem: relu
# expect: 14
# Native calls through ctypes.
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.CDLL(None)
        return torch.relu(x)
