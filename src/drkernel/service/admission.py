"""Admission by estimated device memory: a worker takes jobs while their estimates fit its budget.

The estimate reads the problem statically (no reference code is run in the server): module-level
integer constants, with the problem's CPU overrides on CPU, give the sizes of the tensors that
``get_inputs()`` builds; the job's footprint is a multiple of those bytes (the judge's inputs and
reference outputs, the candidate's copies and outputs, the clones of timed calls) plus a fixed
overhead for the CUDA context and the L2 flush buffer.

The arithmetic is bounded: a constant whose value would pass ``MAX_STATIC_INT`` is unknown, so no
reference can make the server compute a huge integer (repeated squaring) or store one SQLite
cannot hold; the estimate itself is at most ``MAX_ESTIMATE_BYTES``. So are the sizes: a tuple constant
longer than ``MAX_STATIC_TUPLE`` is unknown (no shape has that many dimensions), so starred tuples
(``A1 = (*A0, *A0, ...)``) cannot grow one past it, and folding a module's constants may touch at
most ``MAX_FOLD_WORK`` values in all; code that asks more is `Unreadable` (a 422). Code nested past
the recursion limit is `Unreadable` too (the client's fault), and what is remembered per problem is a digest
and a number, never the code, so refused or distinct references cannot grow the server.
"""

from __future__ import annotations

import ast
import hashlib
import operator
import threading
from collections import OrderedDict
from typing import Sequence

from drkernel import pyast
from drkernel.gym.config import EvalRequest

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4}
FOOTPRINT_FACTOR = 6
OVERHEAD_BYTES = 256 << 20
MAX_STATIC_INT = 1 << 48
"""Largest size constant read statically (2**48 elements is far past any device)."""
MAX_ESTIMATE_BYTES = 1 << 62
MAX_UNSCALED_CPU_ELEMENTS = 1 << 22
"""Most input elements a request with ``cpu_scale: false`` may ask of a CPU judge (`TooLargeForCpu`):
a loaded problem's reference runs in the device's shared judge, where neither the request's
``timeout_s`` nor a cancel reaches, and at a GPU size (2**25 elements of a matmul) it computes for minutes."""
MAX_STATIC_TUPLE = 64
"""Longest tuple constant read statically (a shape's dimensions); a longer one is unknown."""
MAX_FOLD_WORK = 1 << 18
"""Values (ints and tuple elements) folding one problem's constants may produce, all together."""
_TENSOR_MAKERS = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "randperm"}
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}


class _Consts(dict):
    """Module constants by name (an int or a tuple of ints), and the folding work spent on them."""

    work = 0

    def spend(self, n: int) -> None:
        self.work += n
        if self.work > MAX_FOLD_WORK:
            raise Unreadable(f"the problem's module constants take more than {MAX_FOLD_WORK} values to "
                             "read (tuples built from tuples, say): admission does not fold them")


def _value(node: ast.AST, consts: _Consts) -> int | tuple | None:
    """An int or a tuple of ints, from literals, module constants and + - * // **."""
    consts.spend(1)
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return _bounded(node.value)
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        dims = _dims(node.elts, consts)
        return None if dims is None else tuple(dims)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _value(node.left, consts), _value(node.right, consts)
        if not (isinstance(a, int) and isinstance(b, int)):
            return None
        if isinstance(node.op, ast.Pow) and not (0 <= b <= 64 and (abs(a) <= 1 or a.bit_length() * b <= 64)):
            return None
        if isinstance(node.op, ast.FloorDiv) and b == 0:
            return None
        return _bounded(_OPS[type(node.op)](a, b))  # operands below 2**48: the result is small
    return None


def _bounded(v: int) -> int | None:
    return v if -MAX_STATIC_INT <= v <= MAX_STATIC_INT else None


def _dims(args: list[ast.AST], consts: _Consts) -> list[int] | None:
    """Shape arguments (``n, *shape`` or one tuple) as a list of ints; None when not static or longer
    than `MAX_STATIC_TUPLE`."""
    dims: list[int] = []
    for a in args:
        v = _value(a.value if isinstance(a, ast.Starred) else a, consts)
        if isinstance(v, tuple) and (isinstance(a, ast.Starred) or len(args) == 1):
            consts.spend(len(v))
            dims.extend(v)
        elif isinstance(v, int) and not isinstance(a, ast.Starred):
            dims.append(v)
        else:
            return None
        if len(dims) > MAX_STATIC_TUPLE:
            return None
    return dims


def _module_constants(tree: ast.Module, overrides: dict[str, int]) -> _Consts:
    consts = _Consts()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            try:
                value = _value(stmt.value, consts)
            except RecursionError:  # too deep to fold: unknown, like any other value not static
                value = None
            for target in stmt.targets:
                if value is None and isinstance(target, ast.Name):
                    consts.pop(target.id, None)  # reassigned to something unknown: no stale value
                elif isinstance(target, ast.Name):
                    consts[target.id] = value
                elif (
                    isinstance(target, ast.Tuple)
                    and isinstance(value, tuple)
                    and len(value) == len(target.elts)
                ):
                    consts.update({t.id: v for t, v in zip(target.elts, value) if isinstance(t, ast.Name)})
    consts.update(overrides)
    return consts


def _shape_elements(call: ast.Call, consts: _Consts) -> int:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in _TENSOR_MAKERS:
        return 0
    args = list(call.args)
    if name == "randint":
        args = [kw.value for kw in call.keywords if kw.arg == "size"] or args[2:3]
    elif name == "full":
        args = args[:1]
    try:
        dims = _dims(args, consts)
    except RecursionError:  # too deep to fold: not static
        return 0
    if not dims or any(d < 0 for d in dims):
        return 0
    total = 1
    for d in dims:
        total = min(total * d, MAX_STATIC_INT)
    return total


def prepared_on_cpu(device: str, served: Sequence[str] = ()) -> bool:
    """Whether the judge that runs a request for ``device`` is a CPU's (it then prepares the problem at
    its CPU size): ``cpu``; or ``auto`` where every worker of the server (``served``, their devices) is a
    CPU worker, since ``auto`` runs on the device of whichever worker claims the job. Where a worker
    with a GPU may claim it, ``auto`` is estimated at the GPU's size, the larger."""
    if device == "auto":
        return bool(served) and all(d == "cpu" for d in served)
    return device == "cpu"


def estimate_device_bytes(request: EvalRequest, served: Sequence[str] = ()) -> int:
    """Estimated peak device bytes of one evaluation of ``request`` on a server whose workers run
    ``served`` (see the module docstring and `prepared_on_cpu`); `Unreadable` for code nested too
    deeply to read or whose constants take more than `MAX_FOLD_WORK` values to fold; `TooLargeForCpu` for an
    unscaled CPU request past `MAX_UNSCALED_CPU_ELEMENTS`."""
    problem, cfg = request.problem, request.config
    on_cpu = prepared_on_cpu(cfg.device, served)
    scaled = on_cpu and cfg.cpu_scale  # as the judge prepares it: unscaled, the problem's own sizes
    overrides = tuple(sorted(problem.cpu_overrides.items())) if scaled else ()
    elements = _input_elements(problem.code, overrides)
    if on_cpu and not cfg.cpu_scale and elements > MAX_UNSCALED_CPU_ELEMENTS:
        raise TooLargeForCpu(
            f"cpu_scale: false asks {problem.key} at its full size ({elements:,} input elements) of a CPU "
            f"worker, past the {MAX_UNSCALED_CPU_ELEMENTS:,} one runs unscaled (its reference would hold "
            "a judge that no timeout or cancel reaches); leave cpu_scale on to run it at its CPU size")
    if scaled:
        elements = min(elements, cfg.cpu_element_budget)
    return min(MAX_ESTIMATE_BYTES, OVERHEAD_BYTES + FOOTPRINT_FACTOR * elements * DTYPE_BYTES.get(problem.dtype, 4))


class TooLargeForCpu(ValueError):
    """An unscaled request (``cpu_scale: false``) for a CPU judge whose problem is larger than
    `MAX_UNSCALED_CPU_ELEMENTS`. The request's fault, refused before it is stored."""


class Unreadable(ValueError):
    """Problem code that admission cannot read: nested past the interpreter's recursion limit (a
    chain of thousands of operators). The request's fault, refused before it is stored."""


ELEMENTS_CACHE_ENTRIES = 4096
"""Problems whose static input size is remembered. An entry is a digest, the overrides and an int
(a few hundred bytes, whatever the code's size), so the cache holds about 1 MB at most."""
_elements: OrderedDict[tuple[bytes, tuple], int] = OrderedDict()
_elements_lock = threading.Lock()


def _input_elements(code: str, overrides: tuple[tuple[str, int], ...]) -> int:
    """Elements of the tensors ``get_inputs()`` builds, read statically (0 when unknown); remembered
    by the code's digest, never by the code itself (`ELEMENTS_CACHE_ENTRIES`). Raises `Unreadable`."""
    key = (hashlib.sha256(code.encode("utf-8", "surrogatepass")).digest(), overrides)
    with _elements_lock:
        if key in _elements:
            _elements.move_to_end(key)
            return _elements[key]
    n = _read_elements(code, dict(overrides))
    with _elements_lock:
        _elements[key] = n
        if len(_elements) > ELEMENTS_CACHE_ENTRIES:
            _elements.popitem(last=False)
    return n


def _read_elements(code: str, overrides: dict[str, int]) -> int:
    try:
        tree = pyast.parse(code)
    except SyntaxError:
        return 0
    except RecursionError:
        raise Unreadable("the problem's code nests too deeply to be read (a very long chain of "
                         "operators or brackets)") from None
    consts = _module_constants(tree, overrides)
    return min(MAX_STATIC_INT, sum(
        _shape_elements(node, consts)
        for fn in tree.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_inputs"
        for node in ast.walk(fn)
        if isinstance(node, ast.Call)
    ))
