# problem: relu
# default: yes
# expect: 1
# A kernel is defined, never launched; PyTorch does the work.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
