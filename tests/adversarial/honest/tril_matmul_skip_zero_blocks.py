# problem: tril_matmul
# default: yes
# Both inputs are lower triangular (the problem's promise): only the k-blocks between an output
# block's column and row blocks are read, blocks above the diagonal are written as zeros.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tril_mm(a, b, c, n, BLOCK: tl.constexpr):
    bi = tl.program_id(0)
    bj = tl.program_id(1)
    rows = bi * BLOCK + tl.arange(0, BLOCK)
    cols = bj * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    if bi >= bj:
        # only k-blocks between the column block and the row block hold nonzeros of both triangles
        for bk in range(bj, bi + 1):
            ks = bk * BLOCK + tl.arange(0, BLOCK)
            x = tl.load(a + rows[:, None] * n + ks[None, :], mask=(rows[:, None] < n) & (ks[None, :] < n), other=0.0)
            y = tl.load(b + ks[:, None] * n + cols[None, :], mask=(ks[:, None] < n) & (cols[None, :] < n), other=0.0)
            acc += tl.dot(x, y)
    acc = tl.where(rows[:, None] >= cols[None, :], acc, 0.0)
    tl.store(c + rows[:, None] * n + cols[None, :], acc, mask=(rows[:, None] < n) & (cols[None, :] < n))


class ModelNew(nn.Module):
    def forward(self, A, B):
        n = A.shape[0]
        C = torch.empty_like(A)
        BLOCK = 32
        g = triton.cdiv(n, BLOCK)
        tril_mm[(g, g)](A.contiguous(), B.contiguous(), C, n, BLOCK=BLOCK)
        return C
