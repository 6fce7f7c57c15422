import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_rows_kernel(a_ptr, b_ptr, c_ptr, M, N, K, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # Naive: each program owns ROWS full output rows and builds them from K rank-1 updates
    # (no tl.dot, no K tiling, B is re-read from global memory by every program).
    rm = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rn = tl.arange(0, BLOCK_N)
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(a_ptr + rm * K + k, mask=rm < M, other=0.0)
        b = tl.load(b_ptr + k * N + rn, mask=rn < N, other=0.0)
        acc += a[:, None] * b[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)
        matmul_rows_kernel[(triton.cdiv(M, 16),)](A, B, C, M, N, K, ROWS=16, BLOCK_N=triton.next_power_of_2(N))
        return C
