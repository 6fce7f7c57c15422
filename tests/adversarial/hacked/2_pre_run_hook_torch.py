# problem: softmax
# expect: 2
# redteam: compute at launch time (mechanism 4)
# A pre-run hook on the kernel computes torch.softmax into the output before the (no-op) kernel runs.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(y_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = []
        touch_kernel.add_pre_run_hook(self.hook)

    def hook(self, *args, **kwargs):
        for x, y in self.pending:
            y.copy_(torch.softmax(x, dim=1))
        self.pending.clear()

    def forward(self, x):
        y = torch.empty_like(x)
        self.pending.append((x, y))
        touch_kernel[(triton.cdiv(x.numel(), 1024),)](y, x.numel(), BLOCK=1024)
        return y
