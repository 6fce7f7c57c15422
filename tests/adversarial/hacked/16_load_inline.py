# problem: relu
# expect: 16
# An inline C++/CUDA extension instead of Triton.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SRC = "torch::Tensor relu(torch::Tensor x) { return x.clamp_min(0); }"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = load_inline(name="relu_ext", cpp_sources=SRC, functions=["relu"])

    def forward(self, x):
        return self.ext.relu(x)
