"""The static checks' cost where a hostile request can push it: the resolver walks each attribute
chain once (`static._Names.resolve`), so the steps spent on every link of an ``a.b.b...`` chain grow
linearly with its length (counted as executed lines, not timed)."""

from __future__ import annotations

import ast
import sys

from drkernel.gym.verdict import static


def _naive(names: static._Names, node: ast.AST) -> str | None:
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in names.alias:
        return None
    return ".".join([names.alias[node.id], *reversed(attrs)])


def _steps(length: int) -> tuple[int, bool]:
    """Lines executed in the resolver while it resolves every link of one chain of ``length``
    (outermost first, as `ast.walk` visits them), and whether each answer is the naive walk's."""
    tree = static.pyast.parse("import torch.nn as nn\nx = nn" + ".b" * length + "\ny = q" + ".b" * length + "\n")
    names = static._Names(tree)
    links = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    count = 0

    def tracer(frame, event, arg):
        nonlocal count
        if frame.f_code.co_name in ("resolve", "_chain"):
            count += event == "line"
            return tracer
        return None

    sys.settrace(tracer)
    try:
        got = [names.resolve(n) for n in links]
    finally:
        sys.settrace(None)
    return count, got == [_naive(names, n) for n in links]


def test_resolving_every_link_of_a_chain_costs_linear_steps_and_answers_as_the_naive_walk():
    small, same_small = _steps(200)
    large, same_large = _steps(800)
    assert same_small and same_large
    # 4x the length: about 4x the steps (a quadratic walk would be 16x).
    assert large < 5 * small, (small, large)


def test_a_chain_through_getattr_and_a_shared_prefix_resolve_as_before():
    tree = static.pyast.parse("import torch\nimport torch.nn as nn\nv = getattr(nn, 'functional').relu\n"
                              "w = nn.functional\nz = nn.functional.gelu\n")
    names = static._Names(tree)
    got = {ast.unparse(n): names.resolve(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert got["getattr(nn, 'functional').relu"] == "torch.nn.functional.relu"
    assert got["nn.functional"] == "torch.nn.functional"
    assert got["nn.functional.gelu"] == "torch.nn.functional.gelu"
