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
    "drkernel.gym",
    "drkernel.gym.orchestrator.evaluator",
    "drkernel.gym.orchestrator.runtime",
    "drkernel.gym.orchestrator.session",
    "drkernel.gym.orchestrator.pool",
    "drkernel.gym.orchestrator.sandbox",
    "drkernel.gym.seeds",
    "drkernel.gym.verdict.checks",
    "drkernel.gym.verdict.static",
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
