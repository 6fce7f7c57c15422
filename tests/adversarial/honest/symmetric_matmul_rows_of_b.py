# problem: symmetric_matmul
# default: yes
# B is symmetric (the problem's promise): B[k, j] is read as B[j, k], along B's rows, so both
# operands are loaded contiguously.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sym_mm(a, b, c, n, BLOCK: tl.constexpr):
    # B is symmetric: B[k, j] == B[j, k], so B's tile is read along its rows (contiguous)
    bi = tl.program_id(0)
    bj = tl.program_id(1)
    rows = bi * BLOCK + tl.arange(0, BLOCK)
    cols = bj * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for bk in range(0, tl.cdiv(n, BLOCK)):
        ks = bk * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(a + rows[:, None] * n + ks[None, :], mask=(rows[:, None] < n) & (ks[None, :] < n), other=0.0)
        yt = tl.load(b + cols[:, None] * n + ks[None, :], mask=(cols[:, None] < n) & (ks[None, :] < n), other=0.0)
        acc += tl.dot(x, tl.trans(yt))
    tl.store(c + rows[:, None] * n + cols[None, :], acc, mask=(rows[:, None] < n) & (cols[None, :] < n))


class ModelNew(nn.Module):
    def forward(self, A, B):
        n = A.shape[0]
        C = torch.empty_like(A)
        BLOCK = 32
        g = triton.cdiv(n, BLOCK)
        sym_mm[(g, g)](A.contiguous(), B.contiguous(), C, n, BLOCK=BLOCK)
        return C
