"""LayerNorm over the last dimension in CUDA: one block per row, mean and variance in two passes."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""

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

// One block per row: mean, then the variance around it (two passes: the inputs' non-zero mean
// would cost digits in E[x^2] - E[x]^2), then the normalised, scaled and shifted row.
__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y, int cols, float eps) {
    __shared__ float smem[32];
    const float* row = x + (long long)blockIdx.x * cols;
    float* out = y + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += row[c];
    float mean = block_reduce<false>(s, smem) / cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = row[c] - mean; q += d * d; }
    float rstd = rsqrtf(block_reduce<false>(q, smem) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = (row[c] - mean) * rstd * w[c] + b[c];
}

torch::Tensor layernorm_rows(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "layernorm: float32 CUDA");
    auto xc = x.contiguous();
    int cols = (int)xc.size(-1);
    long long rows = xc.numel() / cols;
    auto y = torch::empty_like(xc);
    layernorm_kernel<<<rows, 256>>>(xc.data_ptr<float>(), w.contiguous().data_ptr<float>(),
                                    b.contiguous().data_ptr<float>(), y.data_ptr<float>(), cols, (float)eps);
    return y;
}
"""

ext = load_inline(name="layernorm_ext", cpp_sources="torch::Tensor layernorm_rows(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);",
                  cuda_sources=CUDA_SRC, functions=["layernorm_rows"])


class ModelNew(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))

    def forward(self, x):
        return ext.layernorm_rows(x, self.weight, self.bias, self.eps)
