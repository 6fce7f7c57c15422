# Red team 14, attack 05 (GPU-only; run by scripts/adversarial_gpu.py --kinds gpu) -- problem: builtin/L1/matmul_square (float32)   [GPU-ONLY]
# Family: behaving differently when not observed (timing) + coverage accounting
# Mechanism: every observed call (trials, integrity runs) runs under the Observed dispatch mode, which
#   NaN-poisons every fresh torch.empty outside a launch; the timed calls and the profiled timed calls
#   run unobserved, so the poison itself is the tell (one bool(...) host read per call, <= 4 allowed).
#   The own kernel zeroes the probe before it is freed, so a cached block reused unobserved reads 0.
#   Observed: the honest Triton matmul on all rows (op coverage 1.0). Unobserved: cuBLAS
#   (torch.matmul(out=)) on the last 3/4 of the rows and the Triton kernel on the first 1/4, so the
#   same number of own launches per call (timed_launches passes), own device time stays above the
#   25 %-of-op-coverage agreement of coverage_apart, sampled timed outputs are right (fp32 cuBLAS,
#   TF32 pinned off), events and wall agree (all on the caller's stream).
# Why paid: valid, op coverage 1.0, while the timed speed is mostly cuBLAS's (expected speedup near
#   the reference's own instead of the Triton kernel's).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Grouped tile order: GROUP_M row-blocks share the same B columns while they are hot in L2.
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
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        # Operands are unscaled randn with K in the thousands: plain TF32 (10-bit mantissa) would miss
        # atol 1e-2, 3xTF32 keeps fp32 accuracy on tensor cores.
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))




@triton.jit
def zero_kernel(p_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(p_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


def matmul_into(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    BLOCK_M = max(16, min(128, triton.next_power_of_2(M)))
    BLOCK_N = max(16, min(128, triton.next_power_of_2(N)))
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=3)
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        probe = torch.empty(4, device=A.device, dtype=torch.float32)
        observed = bool(torch.isnan(probe).all())
        zero_kernel[(1,)](probe, 4, BLOCK=4)
        M = A.shape[0]
        C = torch.empty((M, B.shape[1]), device=A.device, dtype=A.dtype)
        if observed or M < 64:
            matmul_into(A, B, C)
            return C
        r = M // 4
        matmul_into(A[:r], B, C[:r])
        torch.matmul(A[r:], B, out=C[r:])
        return C
