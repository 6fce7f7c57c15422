# problem: swiglu
# idiom: triton.heuristics deciding whether the launch needs a mask
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
@triton.jit
def swiglu_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr, EVEN_N: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN_N:
        a = tl.load(a_ptr + offs)
        b = tl.load(b_ptr + offs)
        tl.store(c_ptr + offs, a * tl.sigmoid(a) * b)
    else:
        mask = offs < n
        a = tl.load(a_ptr + offs, mask=mask)
        b = tl.load(b_ptr + offs, mask=mask)
        tl.store(c_ptr + offs, a * tl.sigmoid(a) * b, mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        n = a.numel()
        swiglu_kernel[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)
        return c
