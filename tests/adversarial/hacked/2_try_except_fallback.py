# problem: softmax
# expect: 2
# The Triton path always raises (a bad argument) and the except branch computes in PyTorch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * cols + offs, e / tl.sum(e, axis=0), mask=offs < cols)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        try:
            softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=x.shape[1] + 1)
        except Exception:
            y = torch.softmax(x, dim=1)
        return y
