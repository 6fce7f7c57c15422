# problem: relu
# expect: 4
# ModelNew is the reference class under another name.
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


ModelNew = Model
