"""The built-in problem suite: layout, metadata, and every solution getting the gym verdict its label
says (``builtin_check.EXPECTATIONS``).

Solutions run through the real gym on CPU (Triton interpreter): one ``InProcessEvaluator`` for the
module evaluates all selected solutions concurrently with ``evaluate_batch``.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from drkernel.gym import EvalConfig, EvalRequest
from drkernel.gym.orchestrator.evaluator import InProcessEvaluator
from drkernel.problems import builtin_solution, load_builtin
from drkernel.problems.loaders import builtin_root


def _load_checker():
    path = Path(__file__).with_name("builtin_check.py")
    spec = importlib.util.spec_from_file_location("builtin_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["builtin_check"] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


check = _load_checker()

PROBLEMS = load_builtin()
CASES = [(p, f, label) for p in PROBLEMS for f, label in sorted(p.metadata["solutions"].items(),
                                                                key=lambda kv: (kv[0] != "gold.py", kv[0]))]
META_KEYS = {"level", "dtype", "cpu_overrides", "description", "notes"}
DTYPES = {"float32", "float16", "bfloat16"}
MIN_PROBLEMS = 40
# Minimum number of lazy and of slow solutions per level.
MIN_LABELLED = {1: 4, 2: 4, 3: 2}
pytestmark = pytest.mark.timeout(1800)


def _problem_id(problem) -> str:
    return f"level{problem.level}/{problem.name}"


def _meta(problem) -> dict:
    return json.loads((Path(problem.metadata["dir"]) / "meta.json").read_text())


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
    assert len(PROBLEMS) >= MIN_PROBLEMS
    for level, minimum in MIN_LABELLED.items():
        labels = [label for p in PROBLEMS if p.level == level for label in p.metadata["solutions"].values()]
        for label in ("lazy", "slow"):
            count = labels.count(label)
            assert count >= minimum, f"level {level} has {count} {label} solutions, wants {minimum}"


@pytest.mark.parametrize("problem", PROBLEMS, ids=_problem_id)
def test_problem_layout_and_metadata(problem):
    problem_dir = Path(problem.metadata["dir"])
    meta = _meta(problem)
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

    solutions = problem.metadata["solutions"]
    files = {p.name for p in problem_dir.glob("*.py")}
    assert "gold.py" in files
    assert files == {"reference.py", *solutions}, "unlabelled python file"
    for filename in solutions:
        text = (problem_dir / filename).read_text()
        assert "class ModelNew" in text and "@triton.jit" in text


def test_readme_table_is_current():
    path = Path(__file__).resolve().parents[2] / "scripts" / "suite_readme.py"
    spec = importlib.util.spec_from_file_location("suite_readme", path)
    readme_script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(readme_script)
    readme = (builtin_root() / "README.md").read_text()
    assert readme_script.table() in readme, "README.md is out of date: run python scripts/suite_readme.py"


# --- every solution through the gym --------------------------------------------------------------


def _case_id(case) -> str:
    problem, filename, _ = case
    return f"{_problem_id(problem)}/{filename}"


@pytest.fixture(scope="module")
def suite_results(request):
    """EvalResults of the solutions the session selected, keyed by case id, from one batch."""
    items = [i for i in request.session.items if i.module.__name__ == __name__ and hasattr(i, "callspec")]
    selected = [i.callspec.params["case"] for i in items if "case" in i.callspec.params]
    config = EvalConfig(device="cpu", trials=2, timing=False)
    reqs = [EvalRequest(problem, builtin_solution(problem, filename), config)
            for problem, filename, _ in selected]
    with InProcessEvaluator(device="cpu", concurrency=2, pool_size=2) as evaluator:
        results = asyncio.run(evaluator.evaluate_batch(reqs))
    return {_case_id(case): result for case, result in zip(selected, results)}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_solution_gets_the_verdict_its_label_says(case, suite_results):
    result = suite_results[_case_id(case)]
    found = check.violations(case[2], result)
    details = {"status": result.status.value, "op_coverage": result.op_coverage, "error": result.error,
               "hacks": [(h.code, h.evidence) for h in result.hacks], "warnings": result.warnings}
    assert not found, f"{found}\n{json.dumps(details, indent=1)}"
