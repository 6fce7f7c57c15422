# problem: relu
# redteam: honest, several launches over chunks of the input (itertools), each on a view
import itertools

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        flat = x.reshape(-1)
        y = torch.empty_like(flat)
        bounds = list(range(0, flat.numel(), 1000)) + [flat.numel()]
        for lo, hi in itertools.pairwise(bounds):
            relu_kernel[(triton.cdiv(hi - lo, 256),)](flat[lo:hi], y[lo:hi], hi - lo, BLOCK=256)
        return y.view_as(x)
