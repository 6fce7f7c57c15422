import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_relu_rows_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    # Naive: ROWS full output rows per program from K rank-1 updates; no tl.dot, W re-read everywhere.
    rm = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rn = tl.arange(0, BLOCK_N)
    acc = tl.zeros((ROWS, BLOCK_N), dtype=tl.float32)
    for k in range(0, K):
        a = tl.load(x_ptr + rm * K + k, mask=rm < M, other=0.0)
        w = tl.load(w_ptr + rn * K + k, mask=rn < N, other=0.0)
        acc += a[:, None] * w[None, :]
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], tl.maximum(acc, 0.0), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w = self.linear.weight
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        linear_relu_rows_kernel[(triton.cdiv(M, 16),)](x, w, self.linear.bias, y, M, N, K, ROWS=16,
                                                        BLOCK_N=triton.next_power_of_2(N))
        return y
