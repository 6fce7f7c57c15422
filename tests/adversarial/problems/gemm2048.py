import torch
import torch.nn as nn


class Model(nn.Module):
    """A square fp32 GEMM large enough that a library GEMM in place of a Triton one is a large gain
    (the GPU-only cases of scripts/adversarial_gpu.py)."""

    def forward(self, a, b):
        return a @ b


N = 2048


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
