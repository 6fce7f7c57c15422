# problem: relu
# expect: 16|14
# Reaches the compiler through a run-time name.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = getattr(torch, "com" + "pile")(torch.relu)

    def forward(self, x):
        return self.fn(x)
