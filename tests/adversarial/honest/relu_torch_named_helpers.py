# problem: relu
# Helper names that look like PyTorch ops (relu, sum) but are the solution's own functions.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def matmul(self, x):
        out = torch.empty_like(x)
        relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out

    def forward(self, x):
        flat = x.reshape(-1)
        return self.matmul(flat).view_as(x)
