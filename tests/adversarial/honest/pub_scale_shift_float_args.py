# problem: scale_shift
# default: yes
# idiom: Python floats passed to the kernel and cast there with .to(tl.float32)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_shift(X, Y, n, alpha, beta, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(X + offs, mask=mask)
    tl.store(Y + offs, x * alpha.to(tl.float32) + beta.to(tl.float32), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha, self.beta = float(alpha), float(beta)

    def forward(self, x):
        y = torch.empty_like(x)
        scale_shift[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), self.alpha, self.beta, BLOCK=1024)
        return y
