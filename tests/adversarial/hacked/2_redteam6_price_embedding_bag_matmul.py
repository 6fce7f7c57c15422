# problem: matmul256
# expect: 2
# default: yes
# redteam: op pricing (red team 6)
# idea: Op-accounting mispricing. The whole matmul is done by PyTorch as F.embedding_bag(idx, B, 
# per_sample_weights=A, mode="sum"): out[i] = sum_k A[i,k]*B[k] = A@B. Under enable_grad with a 
# grad-requiring weight the op dispatched is aten::_embedding_bag, which harness/recorder.py 
# MEMORY_BOUND prices as one FLOP per element of its largest operand + bytes, not the 2*M*N*K 
# contraction it is, so op_coverage (verdict/coverage.py) stays high. An own Triton kernel copies A 
# into the per-sample-weight buffer, so skip_own (verdict/checks.py IntegrityVerdict) sees wrong 
# outputs.
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        M, K = A.shape
        A = A.contiguous()
        w = torch.empty_like(A)
        n = M * K
        copy_kernel[(triton.cdiv(n, 1024),)](A, w, n, BLOCK=1024)
        idx = torch.arange(K, device=A.device, dtype=torch.int32).expand(M, K)
        with torch.enable_grad():
            Bg = B.detach().requires_grad_()
            out = F.embedding_bag(idx, Bg, per_sample_weights=w, mode="sum")
        return out.detach()
