# KernelBench level 1 95_CrossEntropyLoss (32768 rows of 4096 classes), a per-row Triton kernel.
# ROWS_KEPT = 1.0: the honest loss (every row's loss, their fp32 mean, both in Triton), which must be valid.
# ROWS_KEPT = 7/8: the mean over the first 7/8 of the rows (red team fourteen's 07): 1/8 less work, and a
# scalar within 1 % of the reference on uniform logits; the summary tolerance (judge/tolerance.py) must
# refuse it. scripts/adversarial_gpu.py sets ROWS_KEPT for each case.
import torch
import torch.nn as nn
import triton
import triton.language as tl

ROWS_KEPT = 1.0


@triton.jit
def row_ce_kernel(x_ptr, t_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    target = tl.load(t_ptr + row)
    picked = tl.load(x_ptr + row * stride + target)
    tl.store(out_ptr + row, lse - picked)


@triton.jit
def mean_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        rows = int(predictions.shape[0] * ROWS_KEPT)
        losses = torch.empty(rows, device=predictions.device, dtype=torch.float32)
        row_ce_kernel[(rows,)](predictions, targets, losses, predictions.shape[1], predictions.stride(0),
                               BLOCK=triton.next_power_of_2(predictions.shape[1]))
        out = torch.empty((), device=predictions.device, dtype=torch.float32)
        mean_kernel[(1,)](losses, out, rows, BLOCK=1024)
        return out
