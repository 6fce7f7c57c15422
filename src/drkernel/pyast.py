"""``ast.parse`` behind one lock, for every parse in a process with threads.

CPython 3.11's AST constructor keeps its recursion depth in state that threads share, so two parses
at once can fail with ``SystemError: AST constructor recursion depth mismatch`` (seen in this suite:
two evaluations' static checks on two threads of one orchestrator; python/cpython gh-106905). A parse
takes microseconds to milliseconds, so one at a time costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    with _LOCK:
        return ast.parse(source, filename)
