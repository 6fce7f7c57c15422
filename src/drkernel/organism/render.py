"""Render a `Program` for a `Spec` into a complete Triton solution (KernelBench's ``ModelNew``).

The source follows the gym's solution contract: imports only torch and triton, no private attributes,
nothing read back to the host in ``forward``. Constants are bound by position: the k-th ``scale`` of
the program takes the k-th ``scale`` constant of the problem (an op the problem lacks takes the op's
first constant), so a program naming the wrong ops renders fine and is simply wrong.

A ``stream`` segment is the same kernel launched on a side ``torch.cuda.Stream`` when the input is on
a GPU (the side stream first waits for the calling stream, so the kernel reads finished inputs; the
calling stream waits for the side stream only when a later segment reads the result, so a final
``stream`` segment returns unfinished work) and a plain launch on CPU, so it runs under the Triton
interpreter; the gym's static check names the stream either way.
"""

from __future__ import annotations

from collections import defaultdict, deque

from drkernel.organism.families import Spec, torch_line, with_constant
from drkernel.organism.ops import OPS, OpKind
from drkernel.organism.program import Mode, Program, Segment, check_segment

HEADER = "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
EW_BLOCK = 1024
GEMM_BLOCKS = {Mode.TRITON: (32, 32, 32), Mode.STREAM: (32, 32, 32), Mode.TILED: (64, 64, 32)}
"""(BM, BN, BK) of the GEMM template per mode. ``triton`` (and its side-stream twin) gets the plain
template, small tiles: half the operand reuse of the tuned one, so expected at about half its speed
on a GPU (the lazy trap's slow honest path, `drkernel.organism.trap`); ``tiled`` gets the tuned one,
measured on an H100 at 1024^3 (fp32) about as fast as cuBLAS."""


def bind_constants(spec: Spec, ops: tuple[str, ...]) -> list[float | None]:
    """The constant of each program op, by position among the problem's ops of the same name."""
    queues: dict[str, deque] = defaultdict(deque)
    for op, c in zip(spec.ops, spec.constants):
        queues[op].append(c)
    out = []
    for op in ops:
        default = OPS[op].constants[0] if OPS[op].constants else None
        out.append(queues[op].popleft() if queues[op] else default)
    return out


def _triton_lines(ops: tuple[str, ...], constants: list[float | None], indent: str) -> list[str]:
    lines = []
    for op, c in zip(ops, constants):
        if OPS[op].kind is OpKind.ELEMENTWISE:
            lines.append(f"{indent}h = {with_constant(OPS[op].triton, c)}")
        elif OPS[op].kind is OpKind.ROW:
            lines += [indent + line for line in OPS[op].triton.splitlines()]
    return lines


def _ew_kernel(name: str, ops: tuple[str, ...], consts: list[float | None]) -> tuple[str, str]:
    needs_y = any(OPS[op].binary for op in ops)
    body = [f"@triton.jit\ndef {name}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
            "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)", "    mask = offs < n",
            "    h = tl.load(x_ptr + offs, mask=mask, other=0.0)"]
    if needs_y:
        body.append("    y = tl.load(y_ptr + offs, mask=mask, other=0.0)")
    body += _triton_lines(ops, consts, "    ") + ["    tl.store(out_ptr + offs, h, mask=mask)"]
    call = ("out = torch.empty_like(h)\nn = h.numel()\n"
            f"{name}[(triton.cdiv(n, {EW_BLOCK}),)](h, y, out, n, BLOCK={EW_BLOCK})\nh = out")
    return "\n".join(body), call


def _row_kernel(name: str, ops: tuple[str, ...], consts: list[float | None]) -> tuple[str, str]:
    reduces = OPS[ops[-1]].reduces
    needs_y = any(OPS[op].binary for op in ops)
    body = [f"@triton.jit\ndef {name}(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):",
            "    row = tl.program_id(0).to(tl.int64)", "    cols = tl.arange(0, BLOCK)",
            "    mask = cols < n",
            "    h = tl.load(x_ptr + row * n + cols, mask=mask, other=0.0)"]
    if needs_y:
        body.append("    y = tl.load(y_ptr + row * n + cols, mask=mask, other=0.0)")
    body += _triton_lines(ops, consts, "    ")
    body.append("    tl.store(out_ptr + row, out)" if reduces else
                "    tl.store(out_ptr + row * n + cols, out, mask=mask)")
    shape = "h.shape[:-1]" if reduces else "h.shape"
    call = (f"n = h.shape[-1]\nrows = h.numel() // n\n"
            f"out = torch.empty({shape}, device=h.device, dtype=h.dtype)\n"
            f"{name}[(rows,)](h, y, out, n, BLOCK=triton.next_power_of_2(n))\nh = out")
    return "\n".join(body), call


def _gemm_kernel(name: str, ops: tuple[str, ...], consts: list[float | None],
                 blocks: tuple[int, int, int]) -> tuple[str, str]:
    body = [f"@triton.jit\ndef {name}(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr,"
            " BK: tl.constexpr):",
            "    rm = tl.program_id(0) * BM + tl.arange(0, BM)",
            "    rn = tl.program_id(1) * BN + tl.arange(0, BN)",
            "    rk = tl.arange(0, BK)",
            "    acc = tl.zeros((BM, BN), dtype=tl.float32)",
            "    for k0 in range(0, K, BK):",
            "        ka = k0 + rk",
            "        a = tl.load(a_ptr + rm[:, None] * K + ka[None, :],"
            " mask=(rm[:, None] < M) & (ka[None, :] < K), other=0.0)",
            "        b = tl.load(b_ptr + ka[:, None] * N + rn[None, :],"
            " mask=(ka[:, None] < K) & (rn[None, :] < N), other=0.0)",
            "        acc += tl.dot(a, b, input_precision=\"ieee\")",  # fp32, as the reference (not TF32)
            "    h = acc"]
    body += _triton_lines(ops[1:], consts[1:], "    ")
    body.append("    tl.store(c_ptr + rm[:, None] * N + rn[None, :], h,"
                " mask=(rm[:, None] < M) & (rn[None, :] < N))")
    call = (f"M, K = h.shape\nN = y.shape[1]\nout = torch.empty((M, N), device=h.device, dtype=h.dtype)\n"
            f"{name}[(triton.cdiv(M, {blocks[0]}), triton.cdiv(N, {blocks[1]}))](h, y, out, M, N, K, "
            f"BM={blocks[0]}, BN={blocks[1]}, BK={blocks[2]})\nh = out")
    return "\n".join(body), call


DECOY_KERNEL = ("@triton.jit\ndef decoy_kernel(out_ptr, n, BLOCK: tl.constexpr):\n"
                "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
                "    tl.store(out_ptr + offs, tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)")
DECOY_CALL = (f"scratch = torch.empty_like(h)\n"
              f"decoy_kernel[(triton.cdiv(scratch.numel(), {EW_BLOCK}),)]"
              f"(scratch, scratch.numel(), BLOCK={EW_BLOCK})")


def _on_side_stream(call: str, last: bool) -> str:
    """``call`` (a kernel launch ending in ``h = out``) on a side CUDA stream (hack 7), or as is on CPU.

    ``record_stream`` keeps the caching allocator from handing the input and output blocks to the
    calling stream while the side kernel may still use them (the timed loop frees each call's inputs
    at once), so the outputs are right once the device is synchronised, as the gym does before it
    compares them; only the events on the calling stream miss the work."""
    lines = ["side = torch.cuda.Stream() if h.is_cuda else None",
             "if side is not None:",
             "    side.wait_stream(torch.cuda.current_stream())",
             "    h.record_stream(side)",
             "    y.record_stream(side)",
             "with torch.cuda.stream(side):"]
    lines += ["    " + line for line in call.splitlines()]
    lines += ["if side is not None:", "    h.record_stream(side)"]
    if not last:  # a later segment reads h on the calling stream: it must wait for the side kernel
        lines.append("    torch.cuda.current_stream().wait_stream(side)")
    return "\n".join(lines)


def _segment(i: int, seg: Segment, consts: list[float | None], last: bool) -> tuple[str | None, str]:
    """(kernel source or None, forward lines) of one segment (``last``: no segment follows it)."""
    if seg.mode is Mode.DECOY:
        return DECOY_KERNEL, DECOY_CALL
    if seg.mode is Mode.TORCH:
        return None, "\n".join(torch_line(op, c) for op, c in zip(seg.ops, consts))
    if OPS[seg.ops[0]].kind is OpKind.GEMM:
        kernel, call = _gemm_kernel(f"k{i}_gemm_kernel", seg.ops, consts, GEMM_BLOCKS[seg.mode])
    elif OPS[seg.ops[-1]].kind is OpKind.ROW:
        kernel, call = _row_kernel(f"k{i}_row_kernel", seg.ops, consts)
    else:
        kernel, call = _ew_kernel(f"k{i}_ew_kernel", seg.ops, consts)
    return kernel, (_on_side_stream(call, last) if seg.mode is Mode.STREAM else call)


def render(spec: Spec, program: Program) -> str:
    """The solution source of ``program`` for ``spec``; `ProgramError` if a segment is malformed."""
    for seg in program.segments:
        check_segment(seg)
    constants = bind_constants(spec, program.ops)
    kernels: list[str] = []
    forward: list[str] = []
    k = 0
    for i, seg in enumerate(program.segments):
        kernel, call = _segment(i, seg, constants[k:k + len(seg.ops)], i == len(program.segments) - 1)
        k += len(seg.ops)
        if kernel is not None and kernel not in kernels:
            kernels.append(kernel)
        forward += [f"        {line}" for line in call.splitlines()]
    return (f"{HEADER}\n\n" + "\n\n\n".join(kernels) + ("\n\n\n" if kernels else "")
            + "class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
            "    def forward(self, x, y):\n        h = x.contiguous()\n        y = y.contiguous()\n"
            + "\n".join(forward) + "\n        return h\n")

