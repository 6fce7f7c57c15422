"""CUDA solutions of built-in problems: ``level{N}/<name>/gold.py``, beside the Triton ones in
``builtin/level{N}/<name>/`` (same problem names, same labels by file-name prefix). See README.md."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from drkernel.errors import ProblemNotFoundError
from drkernel.problems.loaders import solution_label
from drkernel.problems.problem import Problem


def cuda_root() -> Path:
    return Path(str(resources.files("drkernel.problems"))) / "builtin_cuda"


def _dir(problem: Problem) -> Path:
    return cuda_root() / f"level{problem.level}" / problem.name


def cuda_solutions(problem: Problem) -> dict[str, str]:
    """A built-in problem's CUDA solution files and their labels (empty for other problems)."""
    if problem.source != "builtin":
        return {}
    return {f.name: solution_label(f.name) for f in sorted(_dir(problem).glob("*.py")) if solution_label(f.name)}


def cuda_solution(problem: Problem, filename: str = "gold.py") -> str:
    """Source of one of a built-in problem's CUDA solutions."""
    if filename not in cuda_solutions(problem):
        raise ProblemNotFoundError(f"{problem.key} has no CUDA solution {filename!r}")
    return (_dir(problem) / filename).read_text()
