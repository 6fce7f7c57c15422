import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7), built from tl.exp.
    a = tl.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * tl.exp(-a * a)
    return tl.where(x >= 0, y, -y)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, xc * rstd * w + b, mask=mask)


@triton.jit
def linear_kernel(x_ptr, w_ptr, b_ptr, r_ptr, y_ptr, M, N, K, GELU: tl.constexpr, RESIDUAL: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # y = act(x @ W^T + b) (+ r); x (M, K), W (N, K), r and y (M, N), all contiguous.
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    first_pid_m = (pid // num_pid_in_group) * GROUP_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m
    pid_n = (pid % num_pid_in_group) // group_size_m

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    w_ptrs = w_ptr + rn[None, :] * K + rk[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(x_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(w_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    acc += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if GELU:
        acc = 0.5 * acc * (1.0 + _erf(acc * 0.7071067811865476))
    out = rm[:, None].to(tl.int64) * N + rn[None, :]
    out_mask = (rm[:, None] < M) & (rn[None, :] < N)
    if RESIDUAL:
        acc += tl.load(r_ptr + out, mask=out_mask, other=0.0)
    tl.store(y_ptr + out, acc, mask=out_mask)


@triton.jit
def causal_attention_kernel(qkv_ptr, o_ptr, T, C, n_heads, scale,
                            HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Grid (cdiv(T, BLOCK_M), B * n_heads). q, k, v of head h live at columns h*hd, C + h*hd, 2C + h*hd
    # of the (B*T, 3C) qkv rows; the output goes to columns h*hd of the (B*T, C) rows (heads merged).
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = (bh // n_heads).to(tl.int64)
    h = bh % n_heads
    rm = start_m + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, HEAD_DIM)
    row_base = qkv_ptr + b * T * 3 * C + h * HEAD_DIM
    q = tl.load(row_base + rm[:, None] * 3 * C + rd[None, :], mask=rm[:, None] < T, other=0.0)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    for start_n in range(0, T, BLOCK_N):
        rn = start_n + tl.arange(0, BLOCK_N)
        kv_mask = rn[:, None] < T
        k = tl.load(row_base + C + rn[:, None] * 3 * C + rd[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        # Wrong on purpose: no causal mask, every query attends to the whole sequence.
        s = tl.where(rn[None, :] < T, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(row_base + 2 * C + rn[:, None] * 3 * C + rd[None, :], mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p, v)
        m_i = m_new
    o_ptrs = o_ptr + b * T * C + h * HEAD_DIM + rm[:, None] * C + rd[None, :]
    tl.store(o_ptrs, acc / l_i[:, None], mask=rm[:, None] < T)


def layernorm(x, ln):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    BLOCK = triton.next_power_of_2(n_cols)
    layernorm_kernel[(n_rows,)](x, ln.weight, ln.bias, y, n_cols, ln.eps, BLOCK=BLOCK,
                                num_warps=min(16, max(4, BLOCK // 512)))
    return y


def linear(x, layer, gelu=False, residual=None):
    M, K = x.shape
    N = layer.weight.shape[0]
    y = torch.empty((M, N), device=x.device, dtype=x.dtype)
    BLOCK_M = max(16, min(128, triton.next_power_of_2(M)))
    BLOCK_N = max(16, min(128, triton.next_power_of_2(N)))
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    linear_kernel[grid](x, layer.weight, layer.bias, residual if residual is not None else y, y, M, N, K,
                        GELU=gelu, RESIDUAL=residual is not None, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=32,
                        GROUP_M=8, num_warps=8, num_stages=3)
    return y


class ModelNew(nn.Module):
    def __init__(self, embed_dim, n_heads, max_seq_len):
        super().__init__()
        # Parameter holders only, created in the reference's order.
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.ln2 = nn.LayerNorm(embed_dim)
        self.fc = nn.Linear(embed_dim, 4 * embed_dim)
        self.fc_out = nn.Linear(4 * embed_dim, embed_dim)

    def forward(self, x):
        b, t, c = x.shape
        hd = c // self.n_heads
        assert hd >= 16 and hd == triton.next_power_of_2(hd)
        x2 = x.contiguous().view(b * t, c)  # (B*T, C)
        qkv = linear(layernorm(x2, self.ln1), self.qkv)  # (B*T, 3C)
        att = torch.empty_like(x2)  # (B*T, C), heads merged
        BLOCK = max(16, min(64, triton.next_power_of_2(t)))
        causal_attention_kernel[(triton.cdiv(t, BLOCK), b * self.n_heads)](
            qkv, att, t, c, self.n_heads, 1.0 / math.sqrt(hd), HEAD_DIM=hd, BLOCK_M=BLOCK, BLOCK_N=BLOCK,
            num_warps=4, num_stages=2)
        x2 = linear(att, self.proj, residual=x2)
        h = linear(layernorm(x2, self.ln2), self.fc, gelu=True)  # (B*T, 4C)
        return linear(h, self.fc_out, residual=x2).view(b, t, c)
