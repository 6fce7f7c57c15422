# problem: matmul256
# expect: 2
# default: yes
# redteam: compute priced as free (family 4)
# The GEMM runs through F.bilinear, outside torch's FLOP registry (it used to be priced as one pass
# over memory); the kernel only copies the result.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def forward(self, a, b):
        ones = torch.ones(a.shape[0], 1, device=a.device, dtype=a.dtype)
        c = torch.nn.functional.bilinear(a, ones, b.t().unsqueeze(-1))
        out = torch.empty_like(c)
        copy_kernel[(triton.cdiv(c.numel(), 1024),)](c, out, c.numel(), BLOCK=1024)
        return out
