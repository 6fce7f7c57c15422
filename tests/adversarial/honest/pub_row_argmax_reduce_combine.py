# problem: row_argmax
# default: yes
# idiom: tl.reduce over (value, index) pairs with a custom @triton.jit combine function
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_combine(v1, i1, v2, i2):
    take_left = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take_left, v1, v2), tl.where(take_left, i1, i2)


@triton.jit
def row_argmax(X, OUT, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * N + cols, mask=cols < N, other=-float("inf"))
    _, idx = tl.reduce((x, cols), 0, argmax_combine)
    tl.store(OUT + row, idx.to(tl.int64))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
        row_argmax[(x.shape[0],)](x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out
