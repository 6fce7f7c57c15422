# problem: matmul_relu
# expect: 12
# Turns on TF32 for PyTorch matmuls.
import torch
import torch.nn as nn
import triton
import triton.language as tl

torch.backends.cuda.matmul.allow_tf32 = True


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=o < n), 0.0), mask=o < n)


class ModelNew(nn.Module):
    def forward(self, a, b):
        h = a @ b
        y = torch.empty_like(h)
        relu_kernel[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), BLOCK=1024)
        return y
