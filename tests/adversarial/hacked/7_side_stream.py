# problem: relu
# expect: 7
# KernelBench's non-default stream: the kernel runs on a side stream the timer does not wait for.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream() if torch.cuda.is_available() else None

    def forward(self, x):
        y = torch.empty_like(x)
        if self.side is None:
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
            return y
        with torch.cuda.stream(self.side):
            relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
