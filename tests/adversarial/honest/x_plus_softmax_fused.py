# problem: x_plus_softmax
# default: yes
# redteam: honest, stable fused row kernel (max subtracted) for the new problem
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def x_plus_softmax_kernel(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    s = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * cols + offs, tl.where(mask, x, 0.0) + s, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        x_plus_softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
