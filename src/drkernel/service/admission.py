"""Admission by estimated device memory: a worker takes jobs while their estimates fit its budget.

The estimate reads the problem statically (no reference code is run in the server): module-level
integer constants, with the problem's CPU overrides on CPU, give the sizes of the tensors that
``get_inputs()`` builds; the job's footprint is a multiple of those bytes (the judge's inputs and
reference outputs, the candidate's copies and outputs, the clones of timed calls) plus a fixed
overhead for the CUDA context and the L2 flush buffer.
"""

from __future__ import annotations

import ast
import math
import operator

from drkernel.gym.config import EvalRequest

DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4}
FOOTPRINT_FACTOR = 6
OVERHEAD_BYTES = 256 << 20
_TENSOR_MAKERS = {"randn", "rand", "randint", "zeros", "ones", "empty", "full", "randperm"}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Pow: operator.pow}


def _int_value(node: ast.AST, consts: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _int_value(node.left, consts), _int_value(node.right, consts)
        if a is not None and b is not None and (not isinstance(node.op, ast.Pow) or 0 <= b <= 64):
            return _OPS[type(node.op)](a, b)
    return None


def _module_constants(tree: ast.Module, overrides: dict[str, int]) -> dict[str, int]:
    consts: dict[str, int] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            value = _int_value(stmt.value, consts)
            if value is not None:
                consts[stmt.targets[0].id] = value
    consts.update(overrides)
    return consts


def _shape_elements(call: ast.Call, consts: dict[str, int]) -> int:
    name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
    if name not in _TENSOR_MAKERS:
        return 0
    args = list(call.args)
    if name == "randint":
        args = [kw.value for kw in call.keywords if kw.arg == "size"] or args[2:3] or args[1:2]
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    dims = [_int_value(a, consts) for a in args]
    if not dims or any(d is None for d in dims) or name == "full" and len(dims) < 1:
        return 0
    return math.prod(dims)


def estimate_device_bytes(request: EvalRequest) -> int:
    """Estimated peak device bytes of one evaluation of ``request`` (see the module docstring)."""
    problem = request.problem
    on_cpu = request.config.device == "cpu"
    try:
        tree = ast.parse(problem.code)
    except SyntaxError:
        return OVERHEAD_BYTES
    consts = _module_constants(tree, dict(problem.cpu_overrides) if on_cpu else {})
    elements = 0
    for fn in tree.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "get_inputs":
            elements = sum(_shape_elements(node, consts) for node in ast.walk(fn) if isinstance(node, ast.Call))
    if on_cpu and request.config.cpu_scale:
        elements = min(elements, request.config.cpu_element_budget)
    return OVERHEAD_BYTES + FOOTPRINT_FACTOR * elements * DTYPE_BYTES.get(problem.dtype, 4)
