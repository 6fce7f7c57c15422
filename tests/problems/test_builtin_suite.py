"""The built-in problem suite: layout, metadata, and every solution behaving as its label says.

Solutions run on CPU under the Triton interpreter (``builtin_check`` runs them in child processes,
a few problems per child, as many children at once as there are cores). What each label must show
is ``builtin_check.EXPECTATIONS``.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest


def _load_checker():
    path = Path(__file__).with_name("builtin_check.py")
    spec = importlib.util.spec_from_file_location("builtin_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["builtin_check"] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


check = _load_checker()

PROBLEM_DIRS = check.problem_dirs()
CASES = [(d, f) for d in PROBLEM_DIRS for f in check.solution_files(d)]
META_KEYS = {"level", "dtype", "cpu_overrides", "description", "notes"}
DTYPES = {"float32", "float16", "bfloat16"}
MIN_PROBLEMS = 40
# Minimum number of lazy and of slow solutions per level.
MIN_LABELLED = {1: 4, 2: 4, 3: 2}


def _case_id(case) -> str:
    problem_dir, filename = case
    return f"{problem_dir.parent.name}/{problem_dir.name}/{filename}"


def _meta(problem_dir: Path) -> dict:
    return json.loads((problem_dir / "meta.json").read_text())


def _module_int_constants(source: str) -> dict[str, int]:
    """Module-level ``NAME = <int literal>`` assignments of a reference source."""
    constants = {}
    for node in ast.parse(source).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and type(node.value.value) is int):
            constants[node.targets[0].id] = node.value.value
    return constants


# --- layout and metadata ------------------------------------------------------------------------


def test_suite_has_enough_problems_and_labelled_solutions():
    assert len(PROBLEM_DIRS) >= MIN_PROBLEMS
    for level, minimum in MIN_LABELLED.items():
        files = [f for d in PROBLEM_DIRS if _meta(d)["level"] == level for f in check.solution_files(d)]
        for label in ("lazy", "slow"):
            count = sum(check.label_of(f) == label for f in files)
            assert count >= minimum, f"level {level} has {count} {label} solutions, wants {minimum}"


@pytest.mark.parametrize("problem_dir", PROBLEM_DIRS, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_problem_layout_and_metadata(problem_dir: Path):
    meta = _meta(problem_dir)
    assert META_KEYS <= set(meta), f"missing keys {META_KEYS - set(meta)}"
    assert problem_dir.parent.name == f"level{meta['level']}"
    assert meta["dtype"] in DTYPES
    assert meta["description"].strip()

    source = (problem_dir / "reference.py").read_text()
    constants = _module_int_constants(source)
    assert constants, "reference.py defines no module-level size constants"
    assert all(name.isupper() for name in constants)
    for name, value in meta["cpu_overrides"].items():
        assert name in constants, f"cpu_overrides names {name}, not a constant of reference.py"
        assert 0 < value <= constants[name]

    tree = ast.parse(source)
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert {"Model", "get_inputs", "get_init_inputs"} <= names
    devices = [kw for node in ast.walk(tree) if isinstance(node, ast.Call) for kw in node.keywords
               if kw.arg == "device"]
    assert not devices, "get_inputs must not pick a device: the harness runs it under a device context"

    files = {p.name for p in problem_dir.glob("*.py")}
    assert "gold.py" in files
    assert files == {"reference.py", *check.solution_files(problem_dir)}, "unlabelled python file"
    for filename in check.solution_files(problem_dir):
        text = (problem_dir / filename).read_text()
        assert "class ModelNew" in text and "@triton.jit" in text


def test_readme_table_is_current():
    path = Path(__file__).resolve().parents[2] / "scripts" / "suite_readme.py"
    spec = importlib.util.spec_from_file_location("suite_readme", path)
    readme_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_script)
    readme = (check.SUITE_DIR / "README.md").read_text()
    assert readme_script.table() in readme, "README.md is out of date: run python scripts/suite_readme.py"


# --- solutions under the Triton interpreter ------------------------------------------------------


class _SuiteRunner:
    """Checks the selected problems in child processes, a few problems per child, in the background."""

    def __init__(self, dirs: list[Path]):
        workers = max(1, os.cpu_count() or 1)
        n_chunks = min(len(dirs), 3 * workers) or 1
        size = math.ceil(len(dirs) / n_chunks) if dirs else 1
        self._pool = ThreadPoolExecutor(max_workers=workers)
        self._futures: dict[Path, Future] = {}
        for start in range(0, len(dirs), size):
            chunk = dirs[start:start + size]
            future = self._pool.submit(check.check_problems, chunk)
            self._futures.update({d: future for d in chunk})

    def report(self, problem_dir: Path, filename: str):
        reports = self._futures[problem_dir].result()
        tag = f"{problem_dir.parent.name}_{problem_dir.name}"
        matches = [r for r in reports if r.problem == tag and r.solution == filename]
        assert matches, f"the checker returned no report for {tag}/{filename}"
        return matches[0]

    def close(self):
        self._pool.shutdown(cancel_futures=True)


@pytest.fixture(scope="session")
def suite_runner(request):
    selected = []
    for item in request.session.items:
        case = getattr(item, "callspec", None) and item.callspec.params.get("case")
        if case and case[0] not in selected:
            selected.append(case[0])
    runner = _SuiteRunner(selected)
    yield runner
    runner.close()


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_solution_behaves_as_labelled(case, suite_runner):
    problem_dir, filename = case
    report = suite_runner.report(problem_dir, filename)
    expect = check.EXPECTATIONS[report.label]
    details = json.dumps({k: v for k, v in vars(report).items() if v not in (None, {}, False)}, indent=1)
    if expect.correct is not None:
        assert report.correct == expect.correct, details
    if expect.torch_compute is not None:
        assert bool(report.torch_ops) == expect.torch_compute, details
    if report.label != "broken":
        assert report.error is None, details
        assert report.launches > 0, details
    assert not report.mutated_inputs, details
