"""Problems: the `Problem` record, loaders and the built-in suite (standard library only)."""

from drkernel.problems.loaders import (
    builtin_solution,
    find_problem,
    load_builtin,
    load_file,
    load_kernelbench,
    load_problems,
    load_rows,
    resolve_problem,
    solution_label,
)
from drkernel.problems.problem import Problem

__all__ = [
    "Problem",
    "builtin_solution",
    "find_problem",
    "load_builtin",
    "load_file",
    "load_kernelbench",
    "load_problems",
    "load_rows",
    "resolve_problem",
    "solution_label",
]
