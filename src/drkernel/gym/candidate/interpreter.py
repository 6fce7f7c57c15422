"""CPU mode: patches to Triton's interpreter, installed in the candidate before the solution loads.

The interpreter (``TRITON_INTERPRET=1``) runs kernels with numpy on the host. Its known limits
(triton 3.9) are handled here:

- multi-config ``@triton.autotune`` would benchmark on a device: only the first config is used;
- an unmasked out-of-bounds load or store is not caught and corrupts the process: every masked-in
  address of a load, store or atomic is checked against the storages of the launch's tensor
  arguments and of the live tensors whose address the solution took with ``Tensor.data_ptr()``
  (kernels that load their matrices' addresses from a tensor, as Triton's grouped GEMM does), and a
  stray access raises ``IndexError`` (-> ``runtime_error``);
- ``tl.dot`` with a dimension below 16 runs here but does not compile on GPU: rejected as a
  compile error; bf16 ``tl.dot`` gives wrong values here: reported as unsupported on CPU;
- a kernel's rewrite runs in a copy of its module's globals (Triton's own copies the interpreter's
  globals, ``np`` and ``inspect`` among them, into the solution's module);
- Python float arguments, libdevice and the driver's device queries: see `interpreter_compat`;
  inline asm and unlisted libdevice functions do not exist here: failures of solutions that use
  them are classified ``unsupported_on_cpu`` (see `classify`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Callable

import numpy as np

DOT_MIN = 16
UNSUPPORTED_MARK = "is not supported by the Triton interpreter"
DOT_SIZE_MARK = "tl.dot needs every dimension >= 16 on GPU"

_state = threading.local()


def _collect_ranges(args, kwargs) -> tuple[np.ndarray, np.ndarray]:
    spans: list[tuple[int, int]] = []

    def visit(a) -> None:
        if isinstance(a, (tuple, list)):
            for x in a:
                visit(x)
        elif hasattr(a, "base") and hasattr(a, "block_shape"):  # TensorDescriptor
            visit(a.base)
        elif hasattr(a, "untyped_storage"):
            s = a.untyped_storage()
            spans.append((s.data_ptr(), s.data_ptr() + s.nbytes()))
        elif hasattr(a, "base") and hasattr(a.base, "untyped_storage"):  # TensorWrapper
            visit(a.base)

    visit(list(args))
    visit(list(kwargs.values()))
    spans.extend(_pointed_spans())
    spans.sort()
    return (np.array([s for s, _ in spans], dtype=np.uint64), np.array([e for _, e in spans], dtype=np.uint64))


_POINTED: dict[int, tuple[int, weakref.ref]] = {}
"""Storages whose address the solution took (``Tensor.data_ptr()``): start -> (end, the storage, weakly)."""


def _pointed_spans() -> list[tuple[int, int]]:
    """The live storages of `_POINTED` (dead ones dropped): an address a kernel loads from a tensor of
    addresses lands in one of them, as it would in device memory the solution allocated on a GPU."""
    live = []
    for start, (end, ref) in list(_POINTED.items()):
        storage = ref()
        # a storage that moved (``resize_``) or went is no longer at that address: its old span is freed
        # memory other objects reuse (red team 18 wrote a Python list's slot there and read the process)
        if storage is None or storage.data_ptr() != start or storage.nbytes() != end - start:
            del _POINTED[start]
        else:
            live.append((start, end))
    return live


def _recording_data_ptr(original: Callable[[Any], int]) -> Callable[[Any], int]:
    def data_ptr(self: Any) -> int:
        ptr = original(self)
        storage = self.untyped_storage()
        start = storage.data_ptr()
        if start and storage.nbytes():
            _POINTED[start] = (start + storage.nbytes(), weakref.ref(storage))
        return ptr

    data_ptr.__doc__ = original.__doc__
    return data_ptr


def _check(ptrs, mask, what: str) -> None:
    ranges = getattr(_state, "ranges", None)
    if ranges is None:
        return
    from triton.runtime.interpreter import _get_np_dtype

    addr = np.asarray(ptrs.data, dtype=np.uint64)
    if mask is not None:
        addr = addr[np.broadcast_to(np.asarray(mask.data, dtype=bool), addr.shape)]
    addr = addr.ravel()
    if addr.size == 0:
        return
    itemsize = np.dtype(_get_np_dtype(ptrs.get_element_ty())).itemsize
    starts, ends = ranges
    idx = np.searchsorted(starts, addr, side="right").astype(np.int64) - 1
    ok = idx >= 0
    safe = np.clip(idx, 0, None)
    if starts.size:
        ok &= addr + np.uint64(itemsize) <= ends[safe]
    else:
        ok[:] = False
    if not ok.all():
        bad = int(addr[~ok][0])
        n_bad = int((~ok).sum())
        raise IndexError(f"out-of-bounds {what}: {n_bad} masked-in address(es) outside every tensor argument "
                         f"(first at {bad:#x}); mask the {what} with the tensor's size")


REWRITER_NAMES = ("interpreter_semantic", "_InterpreterComparison")
"""The names the interpreter's AST rewrite adds to a kernel's body (`ASTTransformer`)."""


def _compile_and_exec_apart(self: Any, transformed_ast: Any) -> Callable[..., Any]:
    """The interpreter's kernel rewrite, executed in a copy of the kernel's module globals plus the
    names the rewrite adds. Triton's own version copies every global of its interpreter module (``np``,
    ``inspect``, ``triton``, ...) into the kernel's module, the solution's, at its first launch: names
    the static checks never saw bound there."""
    from triton.runtime import interpreter

    code = compile(transformed_ast, filename=self.filename, mode="exec")
    namespace = dict(self.fn.__globals__)
    # The rewrite runs at module level: the kernel's closure (a kernel built in a function that imports
    # triton.language there, as torchao's lazily built kernels do) becomes globals of the copy.
    for name, cell in zip(self.fn.__code__.co_freevars, self.fn.__closure__ or ()):
        with contextlib.suppress(ValueError):  # a cell not yet bound stays unbound
            namespace[name] = cell.cell_contents
    for name in REWRITER_NAMES:
        namespace.setdefault(name, getattr(interpreter, name))
    local_namespace = {**self.kwargs}
    exec(code, namespace, local_namespace)
    return local_namespace[self.fn.__name__]


def install() -> None:
    """Install the CPU-mode patches (idempotent). Call before the solution is imported."""
    from triton.runtime import autotuner, interpreter

    if getattr(interpreter, "_drkernel_patched", False):
        return
    interpreter._drkernel_patched = True
    from drkernel.gym.candidate import interpreter_compat

    interpreter_compat.install()  # float scalars, libdevice, the driver's queries

    interpreter.FunctionRewriter._compile_and_exec = _compile_and_exec_apart
    original_prune = autotuner.Autotuner.prune_configs

    def first_config_only(self, kwargs):
        return original_prune(self, kwargs)[:1]

    autotuner.Autotuner.prune_configs = first_config_only

    original_init = interpreter.GridExecutor._init_args_hst

    def init_args_hst(self, args_dev, kwargs):
        args_hst, kwargs_hst = original_init(self, args_dev, kwargs)
        _state.ranges = _collect_ranges(args_hst, kwargs_hst)
        return args_hst, kwargs_hst

    interpreter.GridExecutor._init_args_hst = init_args_hst
    import torch

    torch.Tensor.data_ptr = _recording_data_ptr(torch.Tensor.data_ptr)

    builder = interpreter.InterpreterBuilder
    load, store = builder.create_masked_load, builder.create_masked_store
    rmw, cas, dot = builder.create_atomic_rmw, builder.create_atomic_cas, builder.create_dot

    def masked_load(self, ptrs, mask, other, cache_policy, is_volatile):
        _check(ptrs, mask, "load")
        return load(self, ptrs, mask, other, cache_policy, is_volatile)

    def masked_store(self, ptrs, value, mask, cache_policy):
        _check(ptrs, mask, "store")
        return store(self, ptrs, value, mask, cache_policy)

    def atomic_rmw(self, rmw_op, ptr, val, mask, sem, scope):
        _check(ptr, mask, "atomic")
        return rmw(self, rmw_op, ptr, val, mask, sem, scope)

    def atomic_cas(self, ptr, cmp_, val, sem, scope):
        _check(ptr, None, "atomic")
        return cas(self, ptr, cmp_, val, sem, scope)

    def checked_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        m, k = a.data.shape[-2:]
        n = b.data.shape[-1]
        if min(m, n, k) < DOT_MIN:
            raise ValueError(f"{DOT_SIZE_MARK} (got M={m}, N={n}, K={k})")
        if "bf16" in (str(a.dtype), str(b.dtype)) or "bfloat16" in (str(a.dtype), str(b.dtype)):
            raise NotImplementedError(f"bf16 tl.dot {UNSUPPORTED_MARK} (it computes wrong values there)")
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_masked_load = masked_load
    builder.create_masked_store = masked_store
    builder.create_atomic_rmw = atomic_rmw
    builder.create_atomic_cas = atomic_cas
    builder.create_dot = checked_dot
