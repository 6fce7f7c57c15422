# problem: relu
# expect: 14
# Spawns a process (to reach the judge or the network).
import subprocess

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        subprocess.run(["true"])
        return torch.relu(x)
