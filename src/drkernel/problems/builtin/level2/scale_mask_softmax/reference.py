"""Attention-score post-processing: scale, causal mask, softmax over keys."""

import torch
import torch.nn as nn

BATCH = 4
HEADS = 16
SEQ = 1024


class Model(nn.Module):
    def __init__(self, seq_len, scale):
        super().__init__()
        self.scale = scale
        self.register_buffer("mask", torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1))

    def forward(self, scores):
        s = (scores * self.scale).masked_fill(self.mask, float("-inf"))
        return torch.softmax(s, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, HEADS, SEQ, SEQ) * 8.0]


def get_init_inputs():
    return [SEQ, 0.125]
