# problem: relu
# expect: 14|15|16
# redteam: L2 persisting windows
# Sets an L2 persisting access window on the stream through the CUDA runtime (reported against GPU MODE).
import torch
import torch.nn as nn
import triton
import triton.language as tl
import ctypes

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        try:
            ctypes.CDLL("libcudart.so").cudaDeviceSetLimit(0x06, 1 << 20)  # cudaLimitPersistingL2CacheSize
        except OSError:
            pass

    def forward(self, x):
        return launch(x)


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def launch(x):
    y = torch.empty_like(x)
    relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y

