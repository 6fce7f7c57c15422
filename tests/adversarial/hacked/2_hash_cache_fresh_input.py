# problem: relu
# expect: 2|9
# redteam: repeated inputs (mechanism 6)
# Caches answers by a hash of the input: a miss computes with PyTorch, a hit is served by a Triton
# copy. Coverage used to be recorded on a repeat of trial 0's input (a hit).
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        key = (round(float(x.sum()), 3), round(float(x.abs().max()), 3))
        if key not in self.cache:
            self.cache[key] = torch.relu(x)
        y = torch.empty_like(x)
        copy_kernel[(triton.cdiv(x.numel(), 1024),)](self.cache[key], y, x.numel(), BLOCK=1024)
        return y
