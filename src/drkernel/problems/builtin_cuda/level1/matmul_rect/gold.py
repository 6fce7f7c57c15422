"""Rectangular fp32 matmul in CUDA: shared-memory tiling (64 x 64 block tiles, 16-wide K slices), bounds-checked edges."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
// C (M x N) = A (M x K) @ B (K x N), fp32 with fp32 accumulation (no TF32: unscaled randn operands
// give outputs of size sqrt(K), where TF32 misses atol 1e-2).
// A block computes a 64 x 64 tile of C from 16-wide slices of A and B staged in shared memory;
// each of its 256 threads holds a 4 x 4 register tile of the result.
#define BM 64
#define BN 64
#define BK 16

__global__ void __launch_bounds__(256) sgemm_tiled(const float* __restrict__ A, const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[BK][BM + 4];  // the A slice transposed: As[k][m]; +4 staggers the banks
    __shared__ float Bs[BK][BN + 4];
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        for (int i = threadIdx.x; i < BM * BK; i += 256) {
            int m = i / BK, k = i % BK, gm = row0 + m, gk = k0 + k;
            As[k][m] = (gm < M && gk < K) ? A[(long long)gm * K + gk] : 0.0f;
        }
        for (int i = threadIdx.x; i < BK * BN; i += 256) {
            int k = i / BN, n = i % BN, gk = k0 + k, gn = col0 + n;
            Bs[k][n] = (gk < K && gn < N) ? B[(long long)gk * N + gn] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) a[i] = As[k][ty * 4 + i];
#pragma unroll
            for (int j = 0; j < 4; ++j) b[j] = Bs[k][tx * 4 + j];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    for (int i = 0; i < 4; ++i) {
        int gm = row0 + ty * 4 + i;
        if (gm >= M) continue;
        for (int j = 0; j < 4; ++j) {
            int gn = col0 + tx * 4 + j;
            if (gn < N) C[(long long)gm * N + gn] = acc[i][j];
        }
    }
}

torch::Tensor matmul_tiled(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32 && a.dim() == 2 && b.dim() == 2 && a.size(1) == b.size(0),
                "matmul: 2-d float32 CUDA operands with matching inner sizes");
    auto ac = a.contiguous();
    auto bc = b.contiguous();
    int M = (int)ac.size(0), K = (int)ac.size(1), N = (int)bc.size(1);
    auto c = torch::empty({M, N}, ac.options());
    dim3 grid((N + BN - 1) / BN, (M + BM - 1) / BM);
    sgemm_tiled<<<grid, 256>>>(ac.data_ptr<float>(), bc.data_ptr<float>(), c.data_ptr<float>(), M, N, K);
    return c;
}
"""

ext = load_inline(name="matmul_rect_ext", cpp_sources="torch::Tensor matmul_tiled(torch::Tensor a, torch::Tensor b);",
                  cuda_sources=CUDA_SRC, functions=["matmul_tiled"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return ext.matmul_tiled(A, B)
