# problem: gelu
# idiom: one libdevice function imported by name, ModuleNotFoundError fallback; grid as a lambda of meta
import torch
import torch.nn as nn
import triton
import triton.language as tl

try:
    from triton.language.extra.libdevice import erf
except ModuleNotFoundError:
    from triton.language.extra.cuda.libdevice import erf


@triton.jit
def _gelu_fwd(X, Y, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(X + offsets, mask=mask, other=0.0)
    tl.store(Y + offsets, x * 0.5 * (1.0 + erf(x / 1.4142135623730951)), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)  # noqa: E731
        _gelu_fwd[grid](x, y, n, BLOCK_SIZE=512)
        return y
