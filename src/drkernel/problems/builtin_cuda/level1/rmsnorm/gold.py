"""RMSNorm (LLaMA style) on fp16 in CUDA: one block per row, fp32 accumulation, one rounding on store."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <cuda_fp16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffff, v, off);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, off));
    return v;
}
// Block-wide sum or max (blockDim.x a multiple of 32); every thread gets the result.
template <bool MAX>
__device__ float block_reduce(float v, float* smem) {
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = MAX ? warp_max(v) : warp_sum(v);
    __syncthreads();  // smem may still be read from the previous call
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < warps ? smem[lane] : (MAX ? -__int_as_float(0x7f800000) : 0.0f);
        w = MAX ? warp_max(w) : warp_sum(w);
        if (lane == 0) smem[0] = w;
    }
    __syncthreads();
    return smem[0];
}

// One block per row of fp16: the mean of squares in fp32, then x * rsqrt(ms + eps) * w rounded once.
__global__ void rmsnorm_kernel(const __half* __restrict__ x, const float* __restrict__ w,
                               __half* __restrict__ y, int cols, float eps) {
    __shared__ float smem[32];
    const __half* row = x + (long long)blockIdx.x * cols;
    __half* out = y + (long long)blockIdx.x * cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { float v = __half2float(row[c]); q += v * v; }
    float r = rsqrtf(block_reduce<false>(q, smem) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __float2half_rn(__half2float(row[c]) * r * w[c]);
}

torch::Tensor rmsnorm_rows(torch::Tensor x, torch::Tensor w, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat16, "rmsnorm: float16 CUDA");
    auto xc = x.contiguous();
    int cols = (int)xc.size(-1);
    long long rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    rmsnorm_kernel<<<rows, 256>>>(reinterpret_cast<const __half*>(xc.data_ptr<at::Half>()),
                                  w.contiguous().data_ptr<float>(),
                                  reinterpret_cast<__half*>(y.data_ptr<at::Half>()), cols, (float)eps);
    return y;
}
"""

ext = load_inline(name="rmsnorm_ext", cpp_sources="torch::Tensor rmsnorm_rows(torch::Tensor x, torch::Tensor w, double eps);",
                  cuda_sources=CUDA_SRC, functions=["rmsnorm_rows"])


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        return ext.rmsnorm_rows(x, self.weight, self.eps)
