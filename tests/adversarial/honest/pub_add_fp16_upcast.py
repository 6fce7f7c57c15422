# problem: add_fp16
# idiom: the sum in fp32 then cast to the output's element type (out_ptr.dtype.element_ty)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_upcast(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    s = tl.load(x_ptr + offs, mask=mask).to(tl.float32) + tl.load(y_ptr + offs, mask=mask).to(tl.float32)
    tl.store(out_ptr + offs, s.to(out_ptr.dtype.element_ty), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        out = torch.empty_like(a)
        add_upcast[(triton.cdiv(a.numel(), 512),)](a, b, out, a.numel(), BLOCK=512, num_warps=2)
        return out
