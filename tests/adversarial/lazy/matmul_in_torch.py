# problem: matmul_relu
# default: yes
# Lazy: the matmul stays in PyTorch, only the cheap relu is a Triton kernel.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, a, b):
        h = torch.matmul(a, b)
        y = torch.empty_like(h)
        relu_kernel[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), BLOCK=1024)
        return y
