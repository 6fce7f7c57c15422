# problem: softmax
# Online softmax over column blocks (two passes inside the kernel).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def online_softmax(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = -float("inf")
    s = 0.0
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    for c0 in range(0, cols, BLOCK):
        offs = c0 + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=-float("inf"))
        tl.store(y_ptr + row * cols + offs, tl.exp(x - m) / s, mask=offs < cols)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        online_softmax[(x.shape[0],)](x, y, x.shape[1], BLOCK=64)
        return y
