"""The pinned install: constraints.txt pins exactly what the Makefile installs, inside pyproject's ranges,
and never torch, triton or nvidia-* (a user's own CUDA build must stay)."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
UNPINNED = ("torch", "triton", "nvidia-")


def _pins() -> dict[str, Version]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version.strip(), f"constraints.txt: not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = Version(version.strip())
    return pins


def _makefile_extras() -> list[str]:
    return re.search(r"^EXTRAS \?= (\S+)$", (ROOT / "Makefile").read_text(), re.M)[1].split(",")


def test_constraints_pin_every_requirement_inside_its_range_and_leave_torch_alone():
    pins = _pins()
    assert not [n for n in pins if n.startswith(UNPINNED)], "torch/triton/nvidia-* must stay unpinned"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in _makefile_extras():
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    for req in reqs:
        name = canonicalize_name(req.name)
        assert "==" not in str(req.specifier), f"pyproject pins {req}: requirements stay ranges"
        if name.startswith(UNPINNED) or (req.marker and not req.marker.evaluate()):
            continue
        assert name in pins, f"{name} is installed by `make setup` but not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {req}"


def test_setup_passes_the_constraints_and_newest_drops_them():
    locked = subprocess.run(["make", "-n", "setup", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    assert "-c constraints.txt" in locked and "--upgrade" not in locked
    newest = subprocess.run(["make", "-n", "setup", "VENV=/nonexistent-venv", "CONSTRAINTS="], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    assert "-c constraints.txt" not in newest and "--upgrade --upgrade-strategy eager" in newest
    assert "keep-torch.txt" in newest  # the venv's own torch stays, even when upgrading
