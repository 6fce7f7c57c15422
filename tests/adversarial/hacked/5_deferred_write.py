# problem: relu
# expect: 0|5
# redteam: outputs resolved lazily in the checker
# Returns the output buffer before writing it: each call writes the previous call's answer, hoping
# the checker reads the tensor late (after the next call).
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = None

    def forward(self, x):
        if self.pending is not None:
            px, py = self.pending
            relu_kernel[(triton.cdiv(px.numel(), 1024),)](px, py, px.numel(), BLOCK=1024)
        y = torch.empty_like(x)
        self.pending = (x.clone(), y)
        return y
