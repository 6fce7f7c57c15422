"""KernelBench level 2, 12_Gemm_Multiply_LeakyReLU: leaky_relu((x @ W^T + b) * multiplier).

A tiled matmul with the bias, the multiplier and the LeakyReLU fused into its epilogue. The
``nn.Linear`` is kept only as the holder of the weights (created in the reference's order, so the
seeded weights match); its forward is never called.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gemm_epilogue_kernel(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K, multiplier, slope,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_ptr + rm[:, None] * K + (k + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + (k + rk)[:, None],
                    mask=(rn[None, :] < N) & ((k + rk)[:, None] < K), other=0.0)
        acc += tl.dot(a, w)
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    acc = acc * multiplier
    acc = tl.where(acc >= 0, acc, acc * slope)
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        x = x.contiguous()
        M, K = x.shape
        N = self.gemm.out_features
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BM, BN, BK = 128, 128, 32
        grid = (triton.cdiv(M, BM), triton.cdiv(N, BN))
        gemm_epilogue_kernel[grid](x, self.gemm.weight, self.gemm.bias, y, M, N, K, self.multiplier,
                                   self.negative_slope, BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK,
                                   num_warps=8, num_stages=3)
        return y
