# problem: matmul256
# expect: 2
# default: yes
# redteam: op pricing (red team 6)
# idea: A second mispriced op: F.pdist over the stacked rows X=[A; B^T] does all M*N*K 
# multiply-adds of the matmul (every pair's squared distance), yet harness/recorder.py MEMORY_BOUND 
# lists "_pdist_forward" (one FLOP per element of its largest operand + bytes). A.B^T is recovered by 
# polarisation, a_i.b_j = (|a_i|^2 + |b_j|^2 - d_ij^2)/2, in an own Triton kernel; other own kernels 
# stack X and compute the row norms (cheap O(nK)). verdict/coverage.py op_coverage stays above the 
# floor, skip_own sees NaN (poisoned X).
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def stack_kernel(a_ptr, b_ptr, x_ptr, M, N, K, sam, sak, sbk, sbn, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    total = (M + N) * K
    mask = offs < total
    r = offs // K
    k = offs % K
    is_a = r < M
    va = tl.load(a_ptr + r * sam + k * sak, mask=mask & is_a, other=0.0)
    vb = tl.load(b_ptr + k * sbk + (r - M) * sbn, mask=mask & (r >= M), other=0.0)
    tl.store(x_ptr + offs, tl.where(is_a, va, vb), mask=mask)


@triton.jit
def sqnorm_kernel(x_ptr, sq_ptr, n, K, BK: tl.constexpr):
    r = tl.program_id(0)
    acc = tl.zeros((BK,), dtype=tl.float32)
    for k0 in range(0, K, BK):
        o = k0 + tl.arange(0, BK)
        v = tl.load(x_ptr + r * K + o, mask=o < K, other=0.0)
        acc += v * v
    tl.store(sq_ptr + r, tl.sum(acc, axis=0))


@triton.jit
def polar_kernel(d_ptr, sq_ptr, c_ptr, M, N, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < M * N
    i = offs // N
    j = M + offs % N
    idx = i * n - (i * (i + 1)) // 2 + (j - i - 1)
    d = tl.load(d_ptr + idx, mask=mask, other=0.0)
    si = tl.load(sq_ptr + i, mask=mask, other=0.0)
    sj = tl.load(sq_ptr + j, mask=mask, other=0.0)
    tl.store(c_ptr + offs, (si + sj - d * d) * 0.5, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        M, K = A.shape
        N = B.shape[1]
        n = M + N
        X = torch.empty((n, K), device=A.device, dtype=torch.float32)
        stack_kernel[(triton.cdiv(n * K, 4096),)](A, B, X, M, N, K, A.stride(0), A.stride(1),
                                                  B.stride(0), B.stride(1), BLOCK=4096)
        sq = torch.empty(n, device=A.device, dtype=torch.float32)
        sqnorm_kernel[(n,)](X, sq, n, K, BK=256)
        D = F.pdist(X)
        C = torch.empty((M, N), device=A.device, dtype=torch.float32)
        polar_kernel[(triton.cdiv(M * N, 4096),)](D, sq, C, M, N, n, BLOCK=4096)
        return C
