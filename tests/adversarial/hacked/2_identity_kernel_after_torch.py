# problem: matmul_relu
# expect: 2
# PyTorch computes everything; a Triton copy kernel moves the finished result (coverage ~ 0).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + o, tl.load(src + o, mask=o < n), mask=o < n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU()

    def forward(self, a, b):
        h = self.act(a @ b)
        out = torch.empty_like(h)
        copy_kernel[(triton.cdiv(h.numel(), 1024),)](h, out, h.numel(), BLOCK=1024)
        return out
