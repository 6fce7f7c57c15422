# problem: relu
# default: yes
# The launch configuration is read from a small tensor once, in __init__ (outside forward): a host
# read the contract allows, and one the harness's own read detector must not mistake for compute.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block, self.warps = torch.tensor([512, 4]).tolist()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, self.block),)](x, y, n, BLOCK=self.block, num_warps=self.warps)
        return y
