# problem: matmul_relu
# expect: 1
# Obfuscated names: a "launcher" helper that never launches; the matmul hides behind an alias.
import torch
import torch.nn as nn
import triton
import triton.language as tl

_fused = torch.matmul


@triton.jit
def fused_mm_relu(a, b, c, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(c + o, tl.load(a + o, mask=o < n), mask=o < n)


def _triton_launch(a, b):
    return _fused(a, b).clamp_min(0.0)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return _triton_launch(a, b)
