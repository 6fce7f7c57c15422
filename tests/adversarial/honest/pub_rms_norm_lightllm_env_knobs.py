# problem: rms_norm
# default: yes
# idiom: ModelTC/lightllm's fused RMSNorm (lightllm/models/llama/triton_kernel/rmsnorm.py, Apache-2.0),
# with the module-level idioms of public kernel files around it: an environment knob read through
# `os.environ.get` (mamba's MAMBA_DETERMINISTIC), `warnings.warn` on a fallback, a `packaging.version`
# check of Triton (importing a library lists the import path: the candidate's working directory must
# not head it) and a `__main__` self-test with `torch.testing` that never runs under the gym.
import os
import warnings

import torch
import torch.nn as nn
import triton
import triton.language as tl
from packaging import version

DETERMINISTIC = os.environ.get("RMSNORM_DETERMINISTIC", "0") == "1"
TRITON_3 = version.parse(triton.__version__) >= version.parse("3.0.0")


@triton.jit
def _rms_norm_fwd_fused(X, Y, x_stride0, x_stride1, y_stride0, y_stride1, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * y_stride0
    X += row * x_stride0
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols * x_stride1, mask=cols < N, other=0.0).to(tl.float32)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(X + cols * x_stride1, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols * y_stride1, (x * rstd).to(Y.dtype.element_ty), mask=mask)


def rmsnorm_forward(x: torch.Tensor, eps: float) -> torch.Tensor:
    y = torch.empty_like(x)
    x_arg = x.view(-1, x.shape[-1])
    y_arg = y.view(-1, x.shape[-1])
    M, N = x_arg.shape
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_SIZE:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    if not TRITON_3 and not DETERMINISTIC:
        warnings.warn("old Triton: the fused kernel may be slow")
    num_warps = triton.next_power_of_2(min(max(BLOCK_SIZE // 256, 1), 4))
    _rms_norm_fwd_fused[(M,)](x_arg, y_arg, x_arg.stride(0), x_arg.stride(1), y_arg.stride(0), y_arg.stride(1),
                              N, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y


class ModelNew(nn.Module):
    def __init__(self, eps):
        super().__init__()
        self.eps = eps

    def forward(self, x):
        return rmsnorm_forward(x, self.eps)


if __name__ == "__main__":
    x = torch.randn(4, 256, device="cuda")
    ref = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(ModelNew(1e-6)(x), ref)
    print("ok")
