# problem: scale_shift
# default: yes
# idiom: the host launcher marked @torch.compiler.disable (libraries keep torch.compile out of it)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine(X, Y, n, alpha, beta, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask) * alpha + beta, mask=mask)


@torch.compiler.disable
def launch(x, alpha, beta):
    y = torch.empty_like(x)
    affine[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), alpha, beta, BLOCK=512)
    return y


class ModelNew(nn.Module):
    def __init__(self, alpha, beta):
        super().__init__()
        self.alpha, self.beta = alpha, beta

    def forward(self, x):
        return launch(x, self.alpha, self.beta)
