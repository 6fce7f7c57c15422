import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def nll_mean_kernel(logp_ptr, t_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_rows, BLOCK):
        rows = start + tl.arange(0, BLOCK)
        mask = rows < n_rows
        t = tl.load(t_ptr + rows, mask=mask, other=0)
        acc += tl.load(logp_ptr + rows * n_cols + t, mask=mask, other=0.0)
    tl.store(out_ptr, -tl.sum(acc, axis=0) / n_rows)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits, targets):
        # log_softmax (all the heavy lifting) is PyTorch's; Triton gathers and averages.
        logp = torch.log_softmax(logits, dim=1).contiguous()
        out = torch.empty((), device=logits.device, dtype=torch.float32)
        nll_mean_kernel[(1,)](logp, targets, out, logp.shape[0], logp.shape[1], BLOCK=256)
        return out
