# problem: relu
# default: yes
# expect: 13
# Hard-codes the checked problem size: right at N = 4096 (or its CPU scale), wrong elsewhere.
import torch
import torch.nn as nn
import triton
import triton.language as tl

SEEN = {}


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


class ModelNew(nn.Module):
    def forward(self, x):
        n = SEEN.setdefault("n", x.numel())
        y = torch.zeros_like(x)
        if x.numel() == n:
            relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
