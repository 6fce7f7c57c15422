# problem: add_fp16
# 2-D blocked view of the fp16 vectors; an in-place add into a copy of a (made by a copy kernel).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + o, tl.load(src + o, mask=o < n), mask=o < n)


@triton.jit
def add_into(dst, b, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(dst + o, tl.load(dst + o, mask=m) + tl.load(b + o, mask=m), mask=m)


class ModelNew(nn.Module):
    def forward(self, a, b):
        n = a.numel()
        out = torch.empty_like(a)
        grid = (triton.cdiv(n, 2048),)
        copy_kernel[grid](a, out, n, BLOCK=2048)
        add_into[grid](out, b, n, BLOCK=2048)
        return out
