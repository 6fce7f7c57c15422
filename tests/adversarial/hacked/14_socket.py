# problem: relu
# expect: 14
# Opens a socket.
import socket

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        return torch.relu(x)
