# problem: relu
# expect: 14
# Enters a new user namespace (unshare(CLONE_NEWUSER)) through ctypes, where it would hold every
# capability: the seccomp filter kills the candidate and the verdict names forbidden_syscall.
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        ctypes.CDLL(None).unshare(0x10000000)  # CLONE_NEWUSER

    def forward(self, x):
        return torch.relu(x)
