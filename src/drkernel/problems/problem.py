"""The `Problem` record: a PyTorch reference in KernelBench format plus metadata.

Standard library only: the gym imports this module, and gym workers run on machines that have
nothing but torch and triton installed.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Problem:
    """One reference problem.

    Attributes:
        name: KernelBench-style name, e.g. ``"19_ReLU"`` or ``"gelu"`` for the built-in suite.
        level: 1 (single operator), 2 (fused chain), 3 (architecture block), 4 (whole model).
        code: reference source defining ``Model``, ``get_inputs`` and ``get_init_inputs``.
        problem_id: identifier within its source (KernelBench's integer id, or the built-in name).
        source: where it came from: ``"kernelbench"``, ``"rows"``, ``"builtin"`` or ``"file"``.
        dtype: the problem's main dtype, as stated by the problem (``"float32"`` when unstated).
        cpu_overrides: module-level constants replaced when the problem runs on CPU; they take
            precedence over the generic scale-down rule.
        metadata: anything else (description, notes, solution files of the built-in suite).
    """

    name: str
    level: int
    code: str
    problem_id: int | str = ""
    source: str = "file"
    dtype: str = "float32"
    cpu_overrides: Mapping[str, int] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Stable, human-readable identifier: ``"{source}/L{level}/{name}"``."""
        return f"{self.source}/L{self.level}/{self.name}"

    @property
    def code_hash(self) -> str:
        """sha256 of the reference source and the CPU overrides (what changes the evaluation)."""
        h = hashlib.sha256(self.code.encode())
        h.update(repr(sorted(self.cpu_overrides.items())).encode())
        return h.hexdigest()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cpu_overrides"] = dict(self.cpu_overrides)
        d["metadata"] = dict(self.metadata)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Problem":
        return cls(
            name=str(d["name"]),
            level=int(d["level"]),
            code=str(d["code"]),
            problem_id=d.get("problem_id", ""),
            source=str(d.get("source", "file")),
            dtype=str(d.get("dtype", "float32")),
            cpu_overrides=dict(d.get("cpu_overrides") or {}),
            metadata=dict(d.get("metadata") or {}),
        )
