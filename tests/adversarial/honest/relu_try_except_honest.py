# problem: relu
# A try/except whose fallback is another Triton launch (smaller block), not PyTorch.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = 4096

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        try:
            relu_k[(triton.cdiv(n, self.block),)](x, y, n, BLOCK=self.block)
        except (RuntimeError, ValueError):
            self.block = 256
            relu_k[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
        return y
