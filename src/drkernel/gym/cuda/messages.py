"""The two messages between the host and the compile child (standard library only)::

    host: compile (CompileJob)        child: compiled (CompileReply, blob = the linked library or empty)

The host trusts neither the reply's bytes nor its text beyond their types: the bytes go into the cache
under the key the host computed from the job, and the text is trimmed before anyone reads it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from drkernel.gym.ipc import ProtocolViolation

COMPILE = "compile"
COMPILED = "compiled"


def _strings(h: dict[str, Any], key: str) -> tuple[str, ...]:
    value = h.get(key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProtocolViolation(f"{key}: a list of strings expected")
    return tuple(value)


def _field(h: dict[str, Any], key: str, kind: type) -> Any:
    value = h.get(key)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ProtocolViolation(f"{key}: {kind.__name__} expected, got {type(value).__name__}")
    return value


@dataclass(frozen=True)
class CompileJob:
    """One extension to build: its sources and flags as ``load_inline`` got them, the device
    architecture (``"90"``), and whether to link (only where torch has its CUDA libraries)."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...]
    functions: tuple[str, ...]
    cflags: tuple[str, ...]
    cuda_cflags: tuple[str, ...]
    arch: str
    link: bool

    def to_header(self) -> dict[str, Any]:
        return {"op": COMPILE, "name": self.name, "cpp_sources": list(self.cpp_sources),
                "cuda_sources": list(self.cuda_sources), "functions": list(self.functions),
                "cflags": list(self.cflags), "cuda_cflags": list(self.cuda_cflags), "arch": self.arch,
                "link": self.link}

    @classmethod
    def from_header(cls, h: dict[str, Any]) -> "CompileJob":
        if h.get("op") != COMPILE:
            raise ProtocolViolation(f"expected {COMPILE}, got {h.get('op')!r}")
        return cls(name=_field(h, "name", str), cpp_sources=_strings(h, "cpp_sources"),
                   cuda_sources=_strings(h, "cuda_sources"), functions=_strings(h, "functions"),
                   cflags=_strings(h, "cflags"), cuda_cflags=_strings(h, "cuda_cflags"),
                   arch=_field(h, "arch", str), link=_field(h, "link", bool))


@dataclass(frozen=True)
class CompileReply:
    """How the build went: ``seconds`` of compiling and linking, the failing tool's output."""

    ok: bool
    seconds: float
    log: str
    linked: bool

    def to_header(self) -> dict[str, Any]:
        return {"op": COMPILED, "ok": self.ok, "seconds": self.seconds, "log": self.log,
                "linked": self.linked}

    @classmethod
    def from_header(cls, h: dict[str, Any]) -> "CompileReply":
        if h.get("op") != COMPILED:
            raise ProtocolViolation(f"expected {COMPILED}, got {h.get('op')!r}")
        seconds = h.get("seconds")
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
            raise ProtocolViolation("seconds: a number expected")
        return cls(ok=_field(h, "ok", bool), seconds=float(seconds), log=_field(h, "log", str)[-200000:],
                   linked=_field(h, "linked", bool))


def build_key(job: CompileJob, toolchain_id: str) -> str:
    """The cache key: sha256 over the job (sources, flags, name, architecture, linking) and the
    toolchain. The host computes it to store a build; a candidate computes it from the arguments its
    ``load_inline`` call really got to find that build (`drkernel.gym.cuda.loader`)."""
    h = hashlib.sha256(json.dumps(job.to_header(), sort_keys=True).encode())
    h.update(b"\0" + toolchain_id.encode())
    return h.hexdigest()
