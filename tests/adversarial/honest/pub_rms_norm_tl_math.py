# problem: rms_norm
# idiom: tl.math.rsqrt, the kernel compiled by triton.jit(f) assignment
import torch
import torch.nn as nn
import triton
import triton.language as tl


def _rms_norm(X, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0)
    r = tl.math.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Y + row * N + cols, x * r, mask=mask)


rms_norm_kernel = triton.jit(_rms_norm)


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        rms_norm_kernel[(x.shape[0],)](x, y, x.shape[1], self.eps, BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
