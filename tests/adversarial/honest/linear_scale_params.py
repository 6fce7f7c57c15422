# problem: linear_scale
# default: yes
# Parameters held in nn.Linear (same init as the reference) but only their weights are read.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_scale_kernel(x_ptr, w_ptr, b_ptr, y_ptr, B, IN: tl.constexpr, OUT: tl.constexpr, scale,
                        BB: tl.constexpr):
    rb = tl.program_id(0) * BB + tl.arange(0, BB)
    ri = tl.arange(0, IN)
    ro = tl.arange(0, OUT)
    x = tl.load(x_ptr + rb[:, None] * IN + ri[None, :], mask=rb[:, None] < B, other=0.0)
    w = tl.load(w_ptr + ro[None, :] * IN + ri[:, None])  # W^T, (IN, OUT)
    acc = tl.dot(x, w, input_precision="ieee") + tl.load(b_ptr + ro)[None, :]
    tl.store(y_ptr + rb[:, None] * OUT + ro[None, :], acc * scale, mask=rb[:, None] < B)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        B = x.shape[0]
        w, b = self.linear.weight, self.linear.bias
        y = torch.empty(B, w.shape[0], device=x.device, dtype=x.dtype)
        linear_scale_kernel[(triton.cdiv(B, 16),)](x, w, b, y, B, IN=w.shape[1], OUT=w.shape[0],
                                                   scale=self.scale, BB=16)
        return y
