# problem: gemm_bias_relu
# expect: 11
# default: yes
# redteam: a fresh round (ten)
# mechanism: instance attribute `detach` set on the returned plain torch.Tensor shadows the method
#   (non-data descriptor); the harness's encode_tree calls v.detach() when it exports the output,
#   outside the observed dispatch mode, and our callable computes the answer there with PyTorch.
#   An own one-store probe kernel tells skip_own runs apart (flag stays 0 -> garbage). The compute
#   sits in a class's __call__, which the strict reach walk (forward -> helpers) never visits.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def probe_kernel(flag_ptr):
    tl.store(flag_ptr, 1.0)


class Late:
    def __init__(self, flag, x, w, b, shape):
        self.flag, self.x, self.w, self.b, self.shape = flag, x, w, b, shape

    def __call__(self):
        if self.flag.item() == 1.0:
            return torch.relu(torch.nn.functional.linear(self.x, self.w, self.b))
        return torch.zeros(self.shape)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        flag = torch.zeros(1, device=x.device)
        probe_kernel[(1,)](flag)
        out = torch.zeros((x.shape[0], self.linear.weight.shape[0]), device=x.device, dtype=x.dtype)
        out.detach = Late(flag, x, self.linear.weight, self.linear.bias, out.shape)
        return out
