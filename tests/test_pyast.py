"""`drkernel.pyast.parse` from many threads at once: CPython 3.11's AST constructor, unguarded, fails
this with "SystemError: AST constructor recursion depth mismatch" (seen in the suite: two static
checks on two orchestrator threads)."""

from __future__ import annotations

import ast
from concurrent.futures import ThreadPoolExecutor

from drkernel import pyast

# deep enough that each parse spends time in the recursive constructor
SOURCE = "\n".join(f"def f{i}(x):\n    return " + "(" * 30 + "x + 1" + ")" * 30 for i in range(60))


def test_parses_on_many_threads_all_succeed_and_agree():
    expected = ast.dump(ast.parse(SOURCE))
    with ThreadPoolExecutor(8) as pool:
        dumps = list(pool.map(lambda _: ast.dump(pyast.parse(SOURCE)), range(200)))
    assert dumps == [expected] * 200


def test_no_module_parses_around_the_lock():
    """The race needs a GC finalizer that releases the GIL in the middle of a parse, which a test
    cannot provoke on demand; what it can pin is that every parse in the package goes through the lock."""
    from pathlib import Path

    import drkernel

    root = Path(drkernel.__file__).parent
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py")
                 if p.name != "pyast.py" and "ast.parse(" in p.read_text().replace("pyast.parse(", "")]
    assert offenders == []
