# problem: relu
# expect: 14
# Asks to be traced (ptrace(PTRACE_TRACEME)) through ctypes, past the audit hook: the seccomp filter
# kills the candidate and the verdict names forbidden_syscall.
import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        ctypes.CDLL(None).ptrace(0, 0, None, None)  # PTRACE_TRACEME
        return torch.relu(x)
