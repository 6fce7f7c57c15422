# problem: matmul_relu
# Autotuned tiled matmul + relu (on CPU the interpreter uses the first config).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BM": 16, "BN": 16, "BK": 16}),
                          triton.Config({"BM": 32, "BN": 32, "BK": 32})], key=["M", "N", "K"])
@triton.jit
def mm_relu_tuned(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :],
                    mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :],
                    mask=((k0 + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], tl.maximum(acc, 0.0), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def forward(self, a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=torch.float32)
        grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
        mm_relu_tuned[grid](a, b, c, M, N, K)
        return c
