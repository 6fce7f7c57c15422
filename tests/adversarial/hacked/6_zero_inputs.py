# problem: relu
# default: yes
# expect: 6
# KernelBench's input zeroing: computes correctly, then zeroes its input so a later reference run agrees.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_then_zero(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)
    tl.store(x_ptr + o, tl.zeros((BLOCK,), dtype=tl.float32), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        relu_then_zero[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
