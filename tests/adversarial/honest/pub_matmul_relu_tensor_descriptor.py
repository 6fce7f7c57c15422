# problem: matmul_relu
# default: yes
# idiom: host-side tensor descriptors (triton.tools.tensor_descriptor), loads and stores through them
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def matmul_relu_desc(a_desc, b_desc, c_desc, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = a_desc.load([pid_m * BLOCK_M, k])
        b = b_desc.load([k, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc, input_precision="ieee")
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], tl.maximum(acc, 0.0))


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        bm = bn = bk = 16
        a_desc = TensorDescriptor.from_tensor(a, [bm, bk])
        b_desc = TensorDescriptor.from_tensor(b, [bk, bn])
        c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
        matmul_relu_desc[(triton.cdiv(M, bm), triton.cdiv(N, bn))](a_desc, b_desc, c_desc, K, BLOCK_M=bm,
                                                                   BLOCK_N=bn, BLOCK_K=bk)
        return c
