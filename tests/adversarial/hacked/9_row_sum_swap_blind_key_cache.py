# problem: row_sum
# expect: 9
# redteam: caching by a sampled key, on an output blind to within-row swaps
# A row sum does not change when two values of one row swap, and the caching checks used to swap only
# within rows. The solution keys a cache on 16 sampled input positions, compared in Triton (no host
# read): a hit copies the cached row sums, a miss computes them. New data misses the key; a
# perturbation that the key does not sample is served from the cache, correctly while swaps stay in
# a row, stale once they cross rows or change values.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def key_kernel(x_ptr, pos_ptr, key_ptr, old_ptr, flag_ptr, S: tl.constexpr):
    i = tl.arange(0, S)
    v = tl.load(x_ptr + tl.load(pos_ptr + i))
    hit = tl.sum((v == tl.load(old_ptr + i)).to(tl.int32), 0) == S
    tl.store(flag_ptr, hit.to(tl.int32))
    tl.store(key_ptr + i, v)


@triton.jit
def sum_or_copy_kernel(x_ptr, cache_ptr, out_ptr, flag_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    if tl.load(flag_ptr) != 0:
        tl.store(out_ptr + row, tl.load(cache_ptr + row))
    else:
        offs = tl.arange(0, BLOCK)
        s = tl.sum(tl.load(x_ptr + row * cols + offs, mask=offs < cols, other=0.0), 0)
        tl.store(out_ptr + row, s)
        tl.store(cache_ptr + row, s)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.state = {}

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        st = self.state.get(tuple(x.shape))
        if st is None:
            g = torch.Generator(device=x.device)
            g.manual_seed(5)
            st = {"pos": torch.randint(0, x.numel(), (16,), generator=g, device=x.device),
                  "key": torch.full((16,), float("nan"), device=x.device),
                  "cache": torch.zeros(rows, device=x.device, dtype=torch.float32)}
            self.state[tuple(x.shape)] = st
        flag = torch.empty(1, device=x.device, dtype=torch.int32)
        key = torch.empty(16, device=x.device, dtype=torch.float32)
        key_kernel[(1,)](x, st["pos"], key, st["key"], flag, S=16)
        st["key"] = key
        out = torch.empty(rows, device=x.device, dtype=torch.float32)
        sum_or_copy_kernel[(rows,)](x, st["cache"], out, flag, cols, BLOCK=triton.next_power_of_2(cols))
        return out
