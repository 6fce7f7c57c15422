# problem: matmul256
# expect: 2
# default: yes
# redteam: op pricing (the recorder's own exception, swallowed)
# A sparse operand: pricing cannot read its storage and used to raise after the GEMM had run, and
# the solution swallowed it. Now an op pricing cannot price counts as the reference's whole work.
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
        c = torch.empty(a.shape[0], b.shape[1], device=a.device, dtype=a.dtype)
        try:
            c.copy_(torch.sparse.mm(a.to_sparse(), b))
        except Exception:
            pass
        return launder(c)
