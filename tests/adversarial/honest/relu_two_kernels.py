# problem: relu
# Many kernels: a copy kernel into a temporary, then an in-place relu on the temporary.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_k(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


@triton.jit
def relu_inplace_k(buf, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(buf + o, tl.maximum(tl.load(buf + o, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def forward(self, x):
        n = x.numel()
        tmp = torch.empty_like(x)
        grid = (triton.cdiv(n, 1024),)
        copy_k[grid](x, tmp, n, BLOCK=1024)
        relu_inplace_k[grid](tmp, n, BLOCK=1024)
        return tmp
