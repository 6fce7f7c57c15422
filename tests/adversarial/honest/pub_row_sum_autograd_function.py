# problem: row_sum
# idiom: an autograd.Function with ctx attributes, the kernel's block from triton.next_power_of_2
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rowsum_fwd(X, OUT, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    x = tl.load(X + row * stride + cols, mask=cols < N, other=0.0)
    tl.store(OUT + row, tl.sum(x, axis=0))


class RowSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.new_empty(x.shape[0])
        rowsum_fwd[(x.shape[0],)](x, out, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        ctx.n_cols = x.shape[1]
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out[:, None].expand(-1, ctx.n_cols)


class ModelNew(nn.Module):
    def forward(self, x):
        return RowSum.apply(x.contiguous())
