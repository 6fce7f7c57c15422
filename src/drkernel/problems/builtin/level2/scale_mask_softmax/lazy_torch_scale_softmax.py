import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def causal_mask_kernel(s_ptr, y_ptr, n, seq, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    col = offs % seq
    row = (offs // seq) % seq
    s = tl.load(s_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.where(col <= row, s, float("-inf")), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, seq_len, scale):
        super().__init__()
        self.scale = scale

    def forward(self, scores):
        # PyTorch scales and takes the softmax (two reductions per row); Triton only applies the mask.
        s = (scores * self.scale).contiguous()
        masked = torch.empty_like(s)
        n = s.numel()
        causal_mask_kernel[(triton.cdiv(n, 1024),)](s, masked, n, s.shape[-1], BLOCK=1024)
        return torch.softmax(masked, dim=-1)
