"""KernelBench level 1, 40_LayerNorm: LayerNorm over the trailing (features, dim1, dim2) dims.

Rows are long (4M elements at full size) and few (16), so statistics are computed in three
launches: partial sums per (row, chunk), a per-row finish (mean, 1/std), and an elementwise
normalise with the affine weight and bias.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def partial_sums_kernel(x_ptr, part_ptr, n, chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    sq = tl.zeros([BLOCK], tl.float32)
    for start in range(0, CHUNK, BLOCK):
        idx = chunk * CHUNK + start + offs
        x = tl.load(x_ptr + row * n + idx, mask=idx < n, other=0.0).to(tl.float32)
        s += x
        sq += x * x
    out = part_ptr + (row * chunks + chunk) * 2
    tl.store(out, tl.sum(s, axis=0))
    tl.store(out + 1, tl.sum(sq, axis=0))


@triton.jit
def finish_kernel(part_ptr, stats_ptr, n, chunks, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    sq = tl.zeros([BLOCK], tl.float32)
    for start in range(0, chunks, BLOCK):
        idx = start + offs
        mask = idx < chunks
        s += tl.load(part_ptr + (row * chunks + idx) * 2, mask=mask, other=0.0)
        sq += tl.load(part_ptr + (row * chunks + idx) * 2 + 1, mask=mask, other=0.0)
    mean = tl.sum(s, axis=0) / n
    var = tl.maximum(tl.sum(sq, axis=0) / n - mean * mean, 0.0)
    tl.store(stats_ptr + row * 2, mean)
    tl.store(stats_ptr + row * 2 + 1, 1.0 / tl.sqrt(var + eps))


@triton.jit
def normalize_kernel(x_ptr, w_ptr, b_ptr, stats_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = idx < n
    mean = tl.load(stats_ptr + row * 2)
    rstd = tl.load(stats_ptr + row * 2 + 1)
    x = tl.load(x_ptr + row * n + idx, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + idx, mask=mask, other=0.0)
    b = tl.load(b_ptr + idx, mask=mask, other=0.0)
    tl.store(y_ptr + row * n + idx, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        CHUNK, BLOCK = 16384, 1024
        chunks = triton.cdiv(n, CHUNK)
        part = torch.empty((rows, chunks, 2), device=x.device, dtype=torch.float32)
        stats = torch.empty((rows, 2), device=x.device, dtype=torch.float32)
        y = torch.empty_like(x)
        partial_sums_kernel[(rows, chunks)](x, part, n, chunks, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=4)
        finish_kernel[(rows,)](part, stats, n, chunks, self.ln.eps, BLOCK=256)
        normalize_kernel[(rows, triton.cdiv(n, BLOCK))](x, self.ln.weight, self.ln.bias, stats, y, n,
                                                         BLOCK=BLOCK, num_warps=4)
        return y
