# problem: matmul_relu
# default: yes
# tolerance: kernelbench
# expect: 12
# tl.dot on fp32 operands without input_precision="ieee" runs as TF32 on the GPU: under the
# kernelbench profile (fp32 at 1e-4) that rides the tolerance.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mm_relu(a_ptr, b_ptr, c_ptr, M, N: tl.constexpr, K: tl.constexpr, BM: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.arange(0, N)
    rk = tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=rm[:, None] < M, other=0.0)
    b = tl.load(b_ptr + rk[:, None] * N + rn[None, :])
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.maximum(tl.dot(a, b), 0.0), mask=rm[:, None] < M)


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty(M, N, device=a.device, dtype=a.dtype)
        mm_relu[(triton.cdiv(M, 16),)](a, b, c, M, N=N, K=K, BM=16)
        return c
