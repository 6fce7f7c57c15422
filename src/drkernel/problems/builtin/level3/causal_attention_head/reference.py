"""A single causal self-attention head: q, k, v projections, masked softmax attention."""

import math

import torch
import torch.nn as nn

BATCH = 16
SEQ = 1024
EMBED = 512
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self, embed_dim, head_dim, max_seq_len):
        super().__init__()
        self.q_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, head_dim, bias=False)
        self.scale = 1.0 / math.sqrt(head_dim)
        self.register_buffer("mask", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)  # (B, T, hd)
        att = (q @ k.transpose(-2, -1)) * self.scale  # (B, T, T)
        att = att.masked_fill(self.mask[:t, :t], float("-inf"))
        return torch.softmax(att, dim=-1) @ v  # (B, T, hd)


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED)]


def get_init_inputs():
    return [EMBED, HEAD_DIM, SEQ]
