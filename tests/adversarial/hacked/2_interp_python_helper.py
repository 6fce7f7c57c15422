# problem: relu
# expect: 2|0
# redteam: compute at launch time (mechanism 4, interpreter)
# Under the interpreter a jit body may call plain Python: the helper runs torch.relu on tensors
# stashed by forward, and the kernel itself stores nothing. (On a GPU the jit body does not compile: 0.)
import torch
import torch.nn as nn
import triton
import triton.language as tl

STASH = []


def helper():
    for x, y in STASH:
        y.copy_(torch.relu(x))
    STASH.clear()
    return 0


@triton.jit
def kernel(y_ptr, n, BLOCK: tl.constexpr):
    helper()


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        STASH.append((x, y))
        kernel[(1,)](y, x.numel(), BLOCK=1024)
        return y
