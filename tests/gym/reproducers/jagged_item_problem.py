"""Problem whose get_inputs reads a value (a copy of an honest-round reproducer; the problem's shape
follows tritonbench's jagged_mean operator, BSD-3): ``int(offsets[-1])`` calls ``.item()``, which the
meta device cannot, so CPU sizing cannot measure it there (the gym used to raise JudgeError on 'prepare').

Mean over the ragged dimension of a jagged (B, *, M) tensor given as values (T, M) and offsets (B + 1,)."""

import torch
import torch.nn as nn

B, M, MAX_LEN = 8, 64, 32


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        lengths = offsets[1:] - offsets[:-1]                                       # (B,)
        seg = torch.repeat_interleave(torch.arange(lengths.numel(), device=values.device), lengths)
        out = torch.zeros(lengths.numel(), values.shape[1], dtype=values.dtype, device=values.device)
        out.index_add_(0, seg, values)
        return out / lengths[:, None].to(values.dtype)


def get_inputs():
    lengths = torch.randint(1, MAX_LEN + 1, (B,))
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
    return [torch.randn(int(offsets[-1]), M), offsets]


def get_init_inputs():
    return []
