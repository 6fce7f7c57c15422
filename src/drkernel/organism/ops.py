"""The organism's operator vocabulary: each op once, as PyTorch source and as Triton source.

An op is written against a running value ``h`` (and, for the binary ops, the second input ``y``);
``{c}`` is where the op's constant goes. The reference problems, the PyTorch segments of a solution and
the Triton kernels all render from these two templates, so a program that names the right ops in the right
order computes the reference exactly (up to float rounding), and one that does not is wrong for real.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class OpKind(str, Enum):
    """Where an op may sit in a kernel: anywhere (elementwise), last (row reduction), first (GEMM)."""

    ELEMENTWISE = "elementwise"
    ROW = "row"
    GEMM = "gemm"


@dataclass(frozen=True)
class Op:
    """One operator.

    Attributes:
        name: the token the policy writes.
        kind: elementwise, row reduction or GEMM.
        torch: PyTorch expression of ``h`` (and ``y``, ``{c}``), or for row ops of the row tensor ``h``.
        triton: Triton expression (elementwise), or statements computing ``out`` from ``h`` (row ops,
            where ``n`` is the row length and ``mask`` the valid columns).
        constants: the constants a problem may give this op (empty: the op has none).
        reduces: a row op whose output has one value per row (logsumexp).
    """

    name: str
    kind: OpKind
    torch: str
    triton: str
    constants: tuple[float, ...] = ()
    reduces: bool = False

    @property
    def binary(self) -> bool:
        return "y" in self.torch.replace("torch", "")


ELEMENTWISE = (
    Op("relu", OpKind.ELEMENTWISE, "torch.relu(h)", "tl.maximum(h, 0.0)"),
    Op("sigmoid", OpKind.ELEMENTWISE, "torch.sigmoid(h)", "tl.sigmoid(h)"),
    Op("tanh", OpKind.ELEMENTWISE, "torch.tanh(h)", "2.0 * tl.sigmoid(2.0 * h) - 1.0"),
    Op("silu", OpKind.ELEMENTWISE, "h * torch.sigmoid(h)", "h * tl.sigmoid(h)"),
    Op("neg", OpKind.ELEMENTWISE, "-h", "-h"),
    Op("abs", OpKind.ELEMENTWISE, "torch.abs(h)", "tl.abs(h)"),
    Op("square", OpKind.ELEMENTWISE, "h * h", "h * h"),
    Op("sin", OpKind.ELEMENTWISE, "torch.sin(h)", "tl.sin(h)"),
    Op("scale", OpKind.ELEMENTWISE, "h * {c}", "h * {c}", constants=(0.5, 2.0, -1.5, 0.25, 3.0)),
    Op("shift", OpKind.ELEMENTWISE, "h + {c}", "h + {c}", constants=(0.5, -1.0, 1.5, -0.25)),
    Op("add_y", OpKind.ELEMENTWISE, "h + y", "h + y"),
    Op("mul_y", OpKind.ELEMENTWISE, "h * y", "h * y"),
)

ROW = (
    Op("softmax", OpKind.ROW, "torch.softmax(h, dim=-1)",
       "m = tl.max(tl.where(mask, h, float('-inf')), axis=0)\n"
       "e = tl.where(mask, tl.exp(h - m), 0.0)\n"
       "out = e / tl.sum(e, axis=0)"),
    Op("logsumexp", OpKind.ROW, "torch.logsumexp(h, dim=-1)",
       "m = tl.max(tl.where(mask, h, float('-inf')), axis=0)\n"
       "out = m + tl.log(tl.sum(tl.where(mask, tl.exp(h - m), 0.0), axis=0))", reduces=True),
    Op("rmsnorm", OpKind.ROW, "h * torch.rsqrt((h * h).mean(dim=-1, keepdim=True) + 1e-6)",
       "hm = tl.where(mask, h, 0.0)\n"
       "out = h / tl.sqrt(tl.sum(hm * hm, axis=0) / n + 1e-6)"),
    Op("l2norm", OpKind.ROW, "torch.nn.functional.normalize(h, dim=-1)",
       "hm = tl.where(mask, h, 0.0)\n"
       "out = h / tl.maximum(tl.sqrt(tl.sum(hm * hm, axis=0)), 1e-12)"),
    Op("layernorm", OpKind.ROW, "torch.nn.functional.layer_norm(h, h.shape[-1:], eps=1e-5)",
       "hm = tl.where(mask, h, 0.0)\n"
       "mu = tl.sum(hm, axis=0) / n\n"
       "d = tl.where(mask, h - mu, 0.0)\n"
       "out = (h - mu) / tl.sqrt(tl.sum(d * d, axis=0) / n + 1e-5)"),
)

GEMM = (Op("matmul", OpKind.GEMM, "h @ y", ""),)

OPS: dict[str, Op] = {op.name: op for op in ELEMENTWISE + ROW + GEMM}
"""Every op by name: 12 elementwise, 5 row reductions, 1 GEMM."""
UNARY = tuple(op for op in ELEMENTWISE if not op.binary)
