"""Loaders: a KernelBench checkout, jsonl/parquet rows, the built-in suite, single files.

All return ``list[Problem]`` sorted by (level, problem_id). ``load_problems(spec)`` accepts the
spec strings the CLI takes:

    builtin              the suite shipped in drkernel/problems/builtin
    builtin:2            ... level 2 only
    path/to/rows.jsonl   rows with columns problem_id, name, level, code (also .parquet)
    path/to/KernelBench  a checkout (KernelBench/level{N}/{id}_{Name}.py); ":N" selects a level
    path/to/problem.py   one reference file
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Iterable, Sequence

from drkernel.errors import ProblemNotFoundError, ProblemSourceError
from drkernel.problems.problem import Problem

_KB_FILE = re.compile(r"^(\d+)_(.+)\.py$")
_LEVEL_DIR = re.compile(r"^level(\d+)$")
_DTYPE_HINTS = (("bfloat16", "bfloat16"), ("float16", "float16"), (".half()", "float16"))
SOLUTION_LABELS = ("gold", "lazy", "slow", "broken")


def infer_dtype(code: str) -> str:
    """The dtype a KernelBench source states in its inputs; ``float32`` when it states none."""
    for needle, dtype in _DTYPE_HINTS:
        if needle in code:
            return dtype
    return "float32"


def _sorted(problems: Iterable[Problem]) -> list[Problem]:
    return sorted(problems, key=lambda p: (p.level, str(p.problem_id).zfill(8), p.name))


def _filter_levels(problems: Iterable[Problem], levels: Sequence[int] | None) -> list[Problem]:
    return _sorted(p for p in problems if not levels or p.level in levels)


def load_kernelbench(root: str | Path, levels: Sequence[int] | None = None) -> list[Problem]:
    """Load a KernelBench checkout: ``root`` may be the repository, its ``KernelBench`` folder,
    or one ``level{N}`` folder."""
    root = Path(root)
    if (root / "KernelBench").is_dir():
        root = root / "KernelBench"
    level_dirs = [root] if _LEVEL_DIR.match(root.name) else sorted(
        d for d in root.iterdir() if d.is_dir() and _LEVEL_DIR.match(d.name)
    )
    if not level_dirs:
        raise ProblemSourceError(f"{root}: no level{{N}} folders (expected a KernelBench checkout)")
    problems = []
    for level_dir in level_dirs:
        level = int(_LEVEL_DIR.match(level_dir.name).group(1))
        for f in sorted(level_dir.glob("*.py")):
            m = _KB_FILE.match(f.name)
            if not m:
                continue
            code = f.read_text()
            problems.append(Problem(name=f.stem, level=level, code=code, problem_id=int(m.group(1)),
                                    source="kernelbench", dtype=infer_dtype(code)))
    return _filter_levels(problems, levels)


def _row_to_problem(row: dict, where: str) -> Problem:
    missing = {"name", "level", "code"} - row.keys()
    if missing:
        raise ProblemSourceError(f"{where}: row lacks columns {sorted(missing)}")
    code = str(row["code"])
    return Problem(name=str(row["name"]), level=int(row["level"]), code=code,
                   problem_id=row.get("problem_id", row["name"]), source="rows",
                   dtype=str(row.get("dtype") or infer_dtype(code)),
                   cpu_overrides=dict(row.get("cpu_overrides") or {}))


def load_rows(path: str | Path, levels: Sequence[int] | None = None) -> list[Problem]:
    """Rows with columns ``problem_id, name, level, code`` from a .jsonl or .parquet file."""
    path = Path(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq  # optional extra [bench]

        rows = pq.read_table(path).to_pylist()
    else:
        rows = []
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ProblemSourceError(f"{path}:{i}: not JSON ({e.msg})") from e
    return _filter_levels((_row_to_problem(r, f"{path}#{i}") for i, r in enumerate(rows)), levels)


def builtin_root() -> Path:
    return Path(str(resources.files("drkernel.problems"))) / "builtin"


def solution_label(filename: str) -> str | None:
    """``gold.py`` -> gold, ``lazy_sum.py`` -> lazy; None for files that are not solutions."""
    stem = Path(filename).stem
    label = stem.split("_", 1)[0]
    return label if label in SOLUTION_LABELS else None


def load_builtin(levels: Sequence[int] | None = None) -> list[Problem]:
    """The suite shipped in the package: ``builtin/level{N}/<name>/{reference.py, meta.json, *.py}``.

    ``metadata["solutions"]`` maps each solution file name to its label (gold, lazy, slow, broken).
    """
    problems = []
    for ref in sorted(builtin_root().glob("level*/*/reference.py")):
        d = ref.parent
        meta = json.loads((d / "meta.json").read_text()) if (d / "meta.json").exists() else {}
        solutions = {f.name: solution_label(f.name) for f in sorted(d.glob("*.py"))
                     if solution_label(f.name)}
        level = int(meta.get("level", d.parent.name.removeprefix("level")))
        extra = {k: v for k, v in meta.items() if k not in ("level", "dtype", "cpu_overrides")}
        problems.append(Problem(name=d.name, level=level, code=ref.read_text(), problem_id=d.name,
                                source="builtin", dtype=meta.get("dtype", "float32"),
                                cpu_overrides=dict(meta.get("cpu_overrides") or {}),
                                metadata={**extra, "solutions": solutions, "dir": str(d)}))
    return _filter_levels(problems, levels)


def builtin_solution(problem: Problem, filename: str = "gold.py") -> str:
    """Source of one of a built-in problem's solutions."""
    if filename not in problem.metadata.get("solutions", {}):
        raise ProblemNotFoundError(f"{problem.key} has no solution {filename!r}")
    return (Path(problem.metadata["dir"]) / filename).read_text()


def load_file(path: str | Path) -> Problem:
    """One reference source file; ``{id}_{Name}.py`` names and ``level{N}`` parents are honoured."""
    path = Path(path)
    code = path.read_text()
    m = _KB_FILE.match(path.name)
    lm = _LEVEL_DIR.match(path.parent.name)
    return Problem(name=path.stem, level=int(lm.group(1)) if lm else 1, code=code,
                   problem_id=int(m.group(1)) if m else path.stem, source="file",
                   dtype=infer_dtype(code))


def _split_level(spec: str) -> tuple[str, list[int] | None]:
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isdigit():
        return head, [int(tail)]
    return spec, None


def load_problems(spec: str) -> list[Problem]:
    """Problems from a spec string (see the module docstring).

    A level that selects nothing (``builtin:7``) is an error, not an empty list: an empty table or
    an empty benchmark would read as success.
    """
    base, levels = _split_level(spec)
    problems = _load_base(spec, base, levels)
    if levels and not problems:
        present = sorted({p.level for p in _load_base(spec, base, None)})
        raise ProblemSourceError(f"{spec!r}: no problems at level {levels[0]} (levels present: {present})")
    return problems


def _load_base(spec: str, base: str, levels: list[int] | None) -> list[Problem]:
    if base == "builtin":
        return load_builtin(levels)
    path = Path(base)
    if not path.exists():
        raise ProblemSourceError(f"{spec!r}: not 'builtin[:N]' and no such file or folder")
    if path.is_dir():
        return load_kernelbench(path, levels)
    if path.suffix in (".jsonl", ".json", ".parquet"):
        return load_rows(path, levels)
    if path.suffix == ".py":
        return [load_file(path)]
    raise ProblemSourceError(f"{spec!r}: unknown problem source (expected .jsonl, .parquet, .py or a folder)")


def find_problem(problems: Sequence[Problem], ident: str) -> Problem:
    """Find by key (``builtin/L1/gelu``), ``L{level}/{name}``, name, or problem id."""
    for p in problems:
        if ident in (p.key, f"L{p.level}/{p.name}", p.name, str(p.problem_id)):
            return p
    matches = [p for p in problems if p.key.endswith(ident)]
    if len(matches) == 1:
        return matches[0]
    raise ProblemNotFoundError(f"no problem {ident!r} among {len(problems)} loaded")


def resolve_problem(ident: str, spec: str = "builtin") -> Problem:
    """A problem from a path to a reference file, or an identifier within ``spec``'s problems."""
    if ident.endswith(".py"):  # a path, never a name: a mistyped one must not read as a failed lookup
        if not Path(ident).is_file():
            raise ProblemSourceError(f"{ident!r}: no such file (a reference .py path)")
        return load_file(ident)
    return find_problem(load_problems(spec), ident)
