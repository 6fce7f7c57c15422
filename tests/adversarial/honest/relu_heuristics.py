# problem: relu
# triton.heuristics picks the block; the launch sits in an own nn.Module used as a submodule.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.heuristics({"BLOCK": lambda args: 1024 if args["n"] >= 1024 else 128})
@triton.jit
def relu_h(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)


class TritonReLU(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_h[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, y, n)
        return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = TritonReLU()

    def forward(self, x):
        return self.act(x)
