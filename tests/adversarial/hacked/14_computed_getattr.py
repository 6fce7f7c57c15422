# problem: relu
# expect: 14|16
# redteam: attribute access with computed names (contract)
# getattr(torch, 'com' + 'pile'): a name built at run time.
import torch
import torch.nn as nn
import triton
import triton.language as tl


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fast = getattr(torch, "com" + "pile")(torch.relu)

    def forward(self, x):
        return self.fast(x) if x.numel() < 0 else launch(x)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def launch(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

