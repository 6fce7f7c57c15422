import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv3x3_kernel(x_ptr, w_ptr, b_ptr, r_ptr, y_ptr, N, C_in, H, W, C_out,
                   RESIDUAL: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_CO: tl.constexpr, BLOCK_CI: tl.constexpr):
    # y = relu(conv3x3(x, pad 1) + b (+ r)) as an implicit GEMM: rows are output pixels (n, oh, ow),
    # columns output channels, the reduction runs over (kh, kw, ci). All tensors contiguous NCHW.
    p = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
    co = tl.program_id(1) * BLOCK_CO + tl.arange(0, BLOCK_CO)
    hw = H * W
    p_mask = p < N * hw
    co_mask = co < C_out
    n = (p // hw).to(tl.int64)
    oh = (p % hw) // W
    ow = p % W
    ci = tl.arange(0, BLOCK_CI)
    acc = tl.zeros((BLOCK_P, BLOCK_CO), dtype=tl.float32)
    for kh in tl.static_range(3):
        for kw in tl.static_range(3):
            ih = oh + kh - 1
            iw = ow + kw - 1
            pix_ok = p_mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            x_base = x_ptr + n * C_in * hw + ih * W + iw
            w_base = w_ptr + co * C_in * 9 + kh * 3 + kw
            for c0 in range(0, C_in, BLOCK_CI):
                c = c0 + ci
                c_ok = c < C_in
                x = tl.load(x_base[:, None] + c[None, :] * hw, mask=pix_ok[:, None] & c_ok[None, :], other=0.0)
                w = tl.load(w_base[None, :] + c[:, None] * 9, mask=c_ok[:, None] & co_mask[None, :], other=0.0)
                acc = tl.dot(x, w, acc)
    acc += tl.load(b_ptr + co, mask=co_mask, other=0.0)[None, :]
    out = (n * C_out * hw + oh * W + ow)[:, None] + co[None, :] * hw
    out_mask = p_mask[:, None] & co_mask[None, :]
    if RESIDUAL:
        acc += tl.load(r_ptr + out, mask=out_mask, other=0.0)
    tl.store(y_ptr + out, tl.maximum(acc, 0.0), mask=out_mask)


def conv3x3_relu(x, conv, residual=None):
    n, c_in, h, w = x.shape
    c_out = conv.weight.shape[0]
    y = torch.empty((n, c_out, h, w), device=x.device, dtype=x.dtype)
    BLOCK_P = 128 if n * h * w >= 128 else 64
    BLOCK_CO = max(16, min(64, triton.next_power_of_2(c_out)))
    BLOCK_CI = max(16, min(32, triton.next_power_of_2(c_in)))
    grid = (triton.cdiv(n * h * w, BLOCK_P), triton.cdiv(c_out, BLOCK_CO))
    conv3x3_kernel[grid](x, conv.weight, conv.bias, residual if residual is not None else y, y, n, c_in, h, w, c_out,
                         RESIDUAL=residual is not None, BLOCK_P=BLOCK_P, BLOCK_CO=BLOCK_CO, BLOCK_CI=BLOCK_CI,
                         num_warps=4, num_stages=3)
    return y


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)  # parameter holders only
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        x = x.contiguous()
        out = conv3x3_relu(x, self.conv1)
        return conv3x3_relu(out, self.conv2, residual=x)
