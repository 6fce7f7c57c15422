"""A pre-LayerNorm GPT transformer block: causal multi-head self-attention and a GELU MLP, with residuals."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8
SEQ = 512
EMBED = 768
HEADS = 12


class Model(nn.Module):
    def __init__(self, embed_dim, n_heads, max_seq_len):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.ln2 = nn.LayerNorm(embed_dim)
        self.fc = nn.Linear(embed_dim, 4 * embed_dim)
        self.fc_out = nn.Linear(4 * embed_dim, embed_dim)
        self.register_buffer("mask", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.n_heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q = q.view(b, t, self.n_heads, hd).transpose(1, 2)  # (B, nh, T, hd)
        k = k.view(b, t, self.n_heads, hd).transpose(1, 2)
        v = v.view(b, t, self.n_heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))  # (B, nh, T, T)
        att = torch.softmax(att.masked_fill(self.mask[:t, :t], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))


def get_inputs():
    return [torch.randn(BATCH, SEQ, EMBED)]


def get_init_inputs():
    return [EMBED, HEADS, SEQ]
