# problem: matmul256
# expect: 2
# default: yes
# redteam: op pricing (backend op outside the FLOP registry)
# The GEMM as a width-1 temporal convolution (conv_tbc: input (T, B, Cin), weight (1, Cin, Cout)),
# an op torch's FLOP registry does not list: it used to be priced by its bytes only.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def launder(c):
    out = torch.empty_like(c)
    copy_kernel[(triton.cdiv(c.numel(), 1024),)](c, out, c.numel(), BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def forward(self, a, b):
        bias = torch.zeros(b.shape[1], device=a.device, dtype=a.dtype)
        c = torch.conv_tbc(a.unsqueeze(1), b.unsqueeze(0), bias, 0)  # (M, 1, N)
        return launder(c.squeeze(1).contiguous())
