"""The gym's layout shows its process boundary: the orchestrator and the verdict never import torch.

A worker's orchestrator runs no solution code and touches no device; the verdict is arithmetic over
reports. If either imported torch, a crash in torch's import (or a CUDA initialisation) would reach
the process that owns the verdict, and start-up would pay torch's import. Checked in a fresh
interpreter, because the test process itself has torch loaded.
"""

import subprocess
import sys

import pytest

TORCH_FREE = [
    "drkernel.devices",
    "drkernel.gym",
    "drkernel.gym.orchestrator.evaluator",
    "drkernel.gym.orchestrator.runtime",
    "drkernel.gym.orchestrator.session",
    "drkernel.gym.orchestrator.pool",
    "drkernel.gym.orchestrator.sandbox",
    "drkernel.gym.seeds",
    "drkernel.gym.verdict.checks",
    "drkernel.gym.verdict.static",
    "drkernel.gym.verdict.module_index",
    "drkernel.gym.verdict.coverage",
    "drkernel.gym.verdict.hacks",
    "drkernel.gym.verdict.classify",
    "drkernel.gym.verdict.plausibility",
]


@pytest.mark.parametrize("module", TORCH_FREE)
def test_module_imports_without_torch(module):
    code = (f"import sys, {module}\n"
            "from drkernel.gym.checks import default_checks\n"
            "default_checks()\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton', 'numpy'))\n"
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{module} pulls in {out.stdout.strip()[:200]}"


def test_packages_by_process():
    """Each process's code lives in its own package; the children run as ``python -m`` packages."""
    import importlib

    for pkg in ("orchestrator", "judge", "candidate", "harness", "verdict"):
        assert importlib.util.find_spec(f"drkernel.gym.{pkg}") is not None, pkg
    for child in ("judge", "candidate"):
        assert importlib.util.find_spec(f"drkernel.gym.{child}.__main__") is not None, child


# The package's import rules (docs/ARCHITECTURE.md, "Layers"): a package never imports one above it,
# at module level or inside a function. Read from the source (every `import` statement), so an import
# hidden in a function counts as well.
FORBIDDEN = {
    "gym": ("agent", "bench", "rl", "organism", "sft", "service", "tasks", "cli", "reward"),
    "agent": ("bench", "rl", "organism", "sft", "tasks", "cli"),
    "bench": ("rl", "organism", "sft", "tasks", "cli"),
    "rl": ("organism", "bench", "tasks", "cli"),
    "organism": ("bench", "tasks", "cli"),
    "tasks": ("cli",),
    "reward": ("agent", "bench", "rl", "organism", "tasks", "cli"),
}
DEVIATIONS = {
    "gym/replay.py imports drkernel.bench.io",  # replaying a benchmark's run folder reads it (lazily)
}


def _imports(path):
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_a_layer_above_it(package):
    from pathlib import Path

    import drkernel

    root = Path(drkernel.__file__).parent
    files = [root / "reward.py"] if package == "reward" else sorted((root / package).rglob("*.py"))
    bad = sorted(
        f"{f.relative_to(root)} imports {name}"
        for f in files
        for name in _imports(f)
        if name.split(".")[:2][0] == "drkernel" and len(name.split(".")) > 1
        and name.split(".")[1] in FORBIDDEN[package]
    )
    assert [b for b in bad if b not in DEVIATIONS] == []
