import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_C)
    best = tl.full((BLOCK_R,), float("-inf"), dtype=tl.float32)
    best_idx = tl.zeros((BLOCK_R,), dtype=tl.int64)
    for start in range(0, n_cols, BLOCK_C):
        c = start + cols
        mask = (rows[:, None] < n_rows) & (c[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * n_cols + c[None, :], mask=mask, other=float("-inf")).to(tl.float32)
        tile_max = tl.max(x, axis=1)
        tile_idx = tl.argmax(x, axis=1).to(tl.int64) + start
        # Strictly greater keeps the first occurrence, as torch.argmax does.
        better = tile_max > best
        best_idx = tl.where(better, tile_idx, best_idx)
        best = tl.where(better, tile_max, best)
    tl.store(y_ptr + rows, best_idx, mask=rows < n_rows)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols
        y = torch.empty(x.shape[:-1], device=x.device, dtype=torch.int64)
        BLOCK_R = 16
        BLOCK_C = min(512, triton.next_power_of_2(n_cols))
        argmax_kernel[(triton.cdiv(n_rows, BLOCK_R),)](x, y, n_rows, n_cols, BLOCK_R=BLOCK_R, BLOCK_C=BLOCK_C,
                                                       num_warps=4)
        return y
