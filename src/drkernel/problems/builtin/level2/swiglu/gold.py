import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, w1_ptr, w3_ptr, y_ptr, M, N, K, stride_xm, stride_xk, stride_wn, stride_wk,
                  stride_ym, stride_yn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Both projections share each x tile: x is read once, and the two (M, N) products never hit memory.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
    w_off = rk[:, None] * stride_wk + rn[None, :] * stride_wn
    acc1 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    acc3 = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        w_mask = (rk[:, None] < k_left) & (rn[None, :] < N)
        acc1 = tl.dot(a, tl.load(w1_ptr + w_off, mask=w_mask, other=0.0), acc1)
        acc3 = tl.dot(a, tl.load(w3_ptr + w_off, mask=w_mask, other=0.0), acc3)
        x_ptrs += BLOCK_K * stride_xk
        w_off += BLOCK_K * stride_wk
    y = acc1 / (1.0 + tl.exp(-acc1)) * acc3
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, y.to(y_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)  # parameter holders only
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        w1, w3 = self.w1.weight, self.w3.weight
        assert w1.stride() == w3.stride()
        M, K = x.shape
        N = w1.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        BLOCK_M = max(16, min(128, triton.next_power_of_2(M)))
        BLOCK_N = max(16, min(64, triton.next_power_of_2(N)))
        grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
        swiglu_kernel[grid](x, w1, w3, y, M, N, K, x.stride(0), x.stride(1), w1.stride(0), w1.stride(1),
                            y.stride(0), y.stride(1), BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=32, GROUP_M=8,
                            num_warps=8, num_stages=3)
        return y
