import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def dwconv3x3_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, C, H, W, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr):
    # Grid (N * C, tiles_h, tiles_w): a 2D output tile of one channel plane; neighbours come from L1/L2.
    plane = tl.program_id(0).to(tl.int64)
    c = plane % C
    oh = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    ow = tl.program_id(2) * BLOCK_W + tl.arange(0, BLOCK_W)
    base = x_ptr + plane * H * W
    acc = tl.zeros((BLOCK_H, BLOCK_W), dtype=tl.float32) + tl.load(b_ptr + c)
    for kh in tl.static_range(3):
        for kw in tl.static_range(3):
            ih = oh + (kh - 1)
            iw = ow + (kw - 1)
            ok = (ih[:, None] >= 0) & (ih[:, None] < H) & (iw[None, :] >= 0) & (iw[None, :] < W)
            v = tl.load(base + ih[:, None] * W + iw[None, :], mask=ok, other=0.0)
            acc += v * tl.load(w_ptr + c * 9 + kh * 3 + kw)
    out_mask = (oh[:, None] < H) & (ow[None, :] < W)
    tl.store(y_ptr + plane * H * W + oh[:, None] * W + ow[None, :], tl.maximum(acc, 0.0).to(y_ptr.dtype.element_ty),
             mask=out_mask)


class ModelNew(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=channels)  # parameter holder only

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        weight = self.conv.weight  # (C, 1, 3, 3), contiguous
        y = torch.empty_like(x)
        BLOCK_H, BLOCK_W = 16, 64 if w > 32 else 32
        grid = (n * c, triton.cdiv(h, BLOCK_H), triton.cdiv(w, BLOCK_W))
        dwconv3x3_relu_kernel[grid](x, weight, self.conv.bias, y, c, h, w, BLOCK_H=BLOCK_H, BLOCK_W=BLOCK_W,
                                    num_warps=4)
        return y
