# problem: layer_norm
# idiom: the whole row in one block, libdevice.rsqrt, a contextlib guard around the launch
import contextlib

import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.language.extra.libdevice import rsqrt
except ModuleNotFoundError:
    from triton.language.extra.cuda.libdevice import rsqrt


def device_guard(t):
    return torch.cuda.device(t.device.index) if t.is_cuda else contextlib.nullcontext()


@triton.jit
def layer_norm_row(X, Y, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(X + row * N + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / N
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / N
    tl.store(Y + row * N + cols, d * rsqrt(var + eps), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        with device_guard(x):
            layer_norm_row[(x.shape[0],)](x, y, x.shape[1], 1e-5, BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
