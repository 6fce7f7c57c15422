# problem: relu
# expect: 14
# Opens an AF_INET socket with a raw syscall through ctypes, bypassing Python's socket module and its
# audit events: the seccomp filter kills the candidate and the verdict names forbidden_syscall.
import ctypes
import platform

import torch
import torch.nn as nn

SYS_SOCKET = {"x86_64": 41, "aarch64": 198}[platform.machine()]


class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.CDLL(None).syscall(SYS_SOCKET, 2, 1, 0)  # socket(AF_INET, SOCK_STREAM, 0)
        return torch.relu(x)
