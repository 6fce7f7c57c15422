# problem: matmul256
# expect: 2
# default: yes
# redteam: op pricing (backend op outside the FLOP registry)
# The GEMM as a 1x1 convolution called by its backend's own name (slow_conv_dilated2d): the registry
# prices aten.convolution, not the kernels below it.
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
        x = a.t().reshape(1, a.shape[1], a.shape[0], 1)            # (1, K, M, 1)
        w = b.t().reshape(b.shape[1], b.shape[0], 1, 1).contiguous()  # (N, K, 1, 1)
        y = torch.ops.aten.slow_conv_dilated2d(x.contiguous(), w, [1, 1], None, [1, 1], [0, 0], [1, 1])
        return launder(y.reshape(b.shape[1], a.shape[0]).t().contiguous())
