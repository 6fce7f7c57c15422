"""The adversarial corpus as data: each file names its problem (and tolerance profile) and, for a
hacked file, the hack code(s) it must be caught with (``# expect: 7|14`` means either; ``0`` means
that failing a correctness trial also catches it, e.g. ``# expect: 0|12``).
``# default: yes`` puts a run-time case in the default test run; the others (and every case that
static analysis rejects, which costs nothing) run in ``make test-slow``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent
NOT_CORRECT = 0
"""In ``# expect:``: a failed correctness trial catches the attack (its outputs were wrong)."""


@dataclass(frozen=True)
class Case:
    path: Path
    kind: str                 # "hacked", "honest" or "lazy"
    problem: str
    expect: tuple[int, ...]   # acceptable hack codes (hacked files)
    tolerance: str
    default: bool             # runs in the default test run (``# default: yes``), else in test-slow

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.path.stem}"

    @property
    def source(self) -> str:
        return self.path.read_text()


def _header(text: str, key: str) -> str | None:
    m = re.search(rf"^# {key}: ([\w|]+)$", text, re.M)
    return m.group(1) if m else None


def cases(kind: str) -> list[Case]:
    out = []
    for path in sorted((ROOT / kind).glob("*.py")):
        text = path.read_text()
        expect = _header(text, "expect")
        out.append(Case(path, kind, _header(text, "problem") or "", tuple(int(c) for c in expect.split("|"))
                        if expect else (), _header(text, "tolerance") or "kernelgym",
                        _header(text, "default") == "yes"))
    return out


def problem_source(name: str) -> str:
    return (ROOT / "problems" / f"{name}.py").read_text()
