# problem: relu
# idiom: a contextlib.contextmanager helper around the launch
import contextlib

import torch
import torch.nn as nn
import triton
import triton.language as tl


@contextlib.contextmanager
def launch_scope(x):
    if not x.is_contiguous():
        raise ValueError("expected a contiguous input")
    yield x.numel()


@triton.jit
def relu_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.where(tl.load(x_ptr + offs, mask=mask) > 0, tl.load(x_ptr + offs, mask=mask), 0.0),
             mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        with launch_scope(x) as n:
            relu_k[(triton.cdiv(n, 128),)](x, y, n, BLOCK=128)
        return y
