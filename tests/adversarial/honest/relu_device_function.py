# problem: relu
# The kernel calls a @triton.jit device function.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(v):
    return tl.where(v > 0, v, tl.zeros_like(v))


@triton.jit
def relu_fwd(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, _relu(tl.load(x_ptr + offs, mask=mask)), mask=mask)


def launch(x):
    y = torch.empty_like(x)
    relu_fwd[(triton.cdiv(x.numel(), 2048),)](x, y, x.numel(), BLOCK=2048)
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return launch(x)
