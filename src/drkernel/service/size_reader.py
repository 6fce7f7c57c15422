"""The static reading behind admission: how many input elements a problem's ``get_inputs()`` builds,
from its module-level integer constants (and the CPU overrides), without running any of its code.

Reading is bounded: a constant whose value would pass `MAX_STATIC_INT` is unknown (no repeated
squaring computes a huge integer), a tuple constant longer than `MAX_STATIC_TUPLE` is unknown, and
folding a module's constants may touch at most `MAX_FOLD_WORK` values; code that asks more, or nests
past the parser, is `Unreadable` (the client's fault). Parsing is linear in the source but one C call
that holds the GIL (about 4 s for 1 MiB of tiny statements), so `admission` parses a large source in
a child process of this module (``python -m drkernel.service.size_reader``: code on stdin, a JSON
answer on stdout, its own memory and CPU limits) rather than in the HTTP server.
"""

from __future__ import annotations

import ast
import json
import operator
import resource
import sys

from drkernel import pyast

MAX_STATIC_INT = 1 << 48
"""Largest size constant read statically (2**48 elements is far past any device)."""
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


class Unreadable(ValueError):
    """Problem code that admission cannot read: nested past the interpreter's recursion limit (a
    chain of thousands of operators), constants past `MAX_FOLD_WORK`, or a source its reading child
    could not finish within its limits. The request's fault, refused before it is stored."""


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


def read_elements(code: str, overrides: dict[str, int]) -> int:
    """Elements of the tensors ``get_inputs()`` builds, read statically (0 when unknown or not Python);
    `Unreadable` for code nested past the parser or whose constants take more than `MAX_FOLD_WORK` values."""
    try:
        tree = pyast.parse(code)
    except SyntaxError:
        return 0
    except (RecursionError, MemoryError):  # the parser's own limits on nesting
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


CHILD_MEMORY_BYTES = 1 << 30
"""Address space of a reading child: an AST of the largest accepted source is tens of MB."""
CHILD_CPU_S = 30
"""CPU seconds of a reading child (the parent's wall-clock limit is shorter; this one is a backstop)."""


def main() -> None:
    """Child entry: ``{"code", "overrides"}`` on stdin; ``{"elements": n}`` or ``{"unreadable": msg}``
    on stdout. A child that dies (out of memory, killed) answers nothing: the parent refuses the code."""
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_S, CHILD_CPU_S))
    ask = json.loads(sys.stdin.buffer.read())
    try:
        answer: dict = {"elements": read_elements(ask["code"], dict(ask["overrides"]))}
    except Unreadable as e:
        answer = {"unreadable": str(e)}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
