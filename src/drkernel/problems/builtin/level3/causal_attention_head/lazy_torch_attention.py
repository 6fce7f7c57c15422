import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def causal_softmax_kernel(s_ptr, T, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    i = row % T
    cols = tl.arange(0, BLOCK)
    keep = (cols < T) & (cols <= i)
    s = tl.load(s_ptr + row * T + cols, mask=keep, other=float("-inf"))
    e = tl.exp(s - tl.max(s, axis=0))
    tl.store(s_ptr + row * T + cols, e / tl.sum(e, axis=0), mask=cols < T)


class ModelNew(nn.Module):
    def __init__(self, embed_dim, head_dim, max_seq_len):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, x):
        # Projections and both attention matmuls are PyTorch's; Triton only does the masked softmax.
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        s = (torch.bmm(q, k.transpose(1, 2)) * self.scale).contiguous()
        t = x.shape[1]
        causal_softmax_kernel[(s.numel() // t,)](s, t, BLOCK=triton.next_power_of_2(t))
        return torch.bmm(s, v)
