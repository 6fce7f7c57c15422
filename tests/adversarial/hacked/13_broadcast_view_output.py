# problem: tile
# expect: 13|2
# default: yes
# redteam: storage tricks (family 1)
# The repeat is returned as a broadcast view of one copied row: 31 of 32 rows are never written.
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
    def forward(self, x):
        row = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, row, x.numel(), BLOCK=1024)
        return row.expand(32, x.shape[1])
