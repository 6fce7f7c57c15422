# problem: relu
# tl.where instead of maximum, a lambda grid, a small block.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _k(src, dst, numel, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    idx = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    m = idx < numel
    v = tl.load(src + idx, mask=m, other=0.0)
    tl.store(dst + idx, tl.where(v > 0, v, 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        grid = lambda meta: (triton.cdiv(x.numel(), meta["BLOCK_SIZE"]),)
        _k[grid](x, out, x.numel(), BLOCK_SIZE=512)
        return out
