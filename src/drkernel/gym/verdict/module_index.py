"""The module graph the static check walks, recorded in a child process so the orchestrator stays torch-free.

`drkernel.gym.verdict.static.canonical` follows a dotted name through the modules it really passes
(``typing.sys`` is ``sys``, ``torch.nn.functional.np`` is numpy). Reading those modules means importing
torch, triton and numpy, which the orchestrator must not do (its start-up would pay for them, and their
native libraries would live in the process that owns the verdict). So a child process
(``python -m drkernel.gym.verdict.module_index OUT``) imports them once and records, as a `ModuleIndex`:

* every module reachable from the allowed imports, after importing all of them: its ``__name__`` and its
  module-valued attributes (``vars(m)``, private names included), as they are when it first appears;
* the names in ``sys.modules``, plus every submodule of torch and triton that the check itself would
  import on demand (`static._importable`: public, not forbidden), imported by the child one by one;
* the non-module attributes that shadow such a submodule (``vars(m)[a]`` is a function while ``m.a`` is a
  module): a walk stops there, as it does on live modules.

The index is cached on disk (``$XDG_CACHE_HOME/drkernel/module-index/``, keyed by the Python, torch,
triton, numpy and drkernel versions, the interpreter's prefix and the rules that choose what is imported)
and in memory. A process that has imported torch itself (a candidate, the trainer) reads its own live
modules instead (`LiveModules`): nothing is saved by asking a child there, and a sandboxed candidate
cannot start one.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import json
import logging
import os
import pkgutil
import subprocess
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from drkernel.errors import InfrastructureError

log = logging.getLogger(__name__)

FORMAT = 1
"""Version of the index's JSON layout and of the way it is built; part of the cache key."""
BUILD_TIMEOUT_S = 600
"""How long the child may take to import torch, triton and their public submodules."""
STOP = "stop"
"""`ModuleGraph.attribute`'s answer for an attribute that holds something other than a module."""

Node = Any
"""A module as a graph names it: the module object (`LiveModules`) or its number (`ModuleIndex`)."""


class ModuleGraph(Protocol):
    """What the static check reads from modules: names, module-valued attributes, ``sys.modules``."""

    def loaded(self, name: str) -> Node | None:
        """``sys.modules[name]``, or None."""

    def load(self, name: str) -> Node | None:
        """Import ``name`` (the caller has checked that the rules allow it); None when that fails."""

    def attribute(self, node: Node, attr: str) -> Node | str | None:
        """``vars(module).get(attr)``: a module, `STOP` for any other value, None when absent (or None)."""

    def name(self, node: Node) -> str:
        """The module's ``__name__``."""


class LiveModules:
    """The calling process's own modules, imported on demand."""

    def loaded(self, name: str) -> types.ModuleType | None:
        module = sys.modules.get(name)
        return module if isinstance(module, types.ModuleType) else None

    def load(self, name: str) -> types.ModuleType | None:
        try:
            return importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an absent or broken optional module: the name stays textual
            return None

    def attribute(self, node: types.ModuleType, attr: str) -> types.ModuleType | str | None:
        value = vars(node).get(attr)
        return value if value is None or isinstance(value, types.ModuleType) else STOP

    def name(self, node: types.ModuleType) -> str:
        return node.__name__


@dataclass(frozen=True)
class ModuleIndex:
    """The module graph a child process recorded; nodes are numbers.

    ``names[i]`` is module i's ``__name__``; ``attributes[i]`` maps its module-valued attributes to
    nodes; ``stops[i]`` holds its other attributes that share a name with a module in ``modules``;
    ``modules`` is ``sys.modules`` plus the submodules the check may import, name -> node."""

    names: tuple[str, ...]
    attributes: tuple[dict[str, int], ...]
    stops: dict[int, frozenset[str]]
    modules: dict[str, int]

    def loaded(self, name: str) -> int | None:
        return self.modules.get(name)

    def load(self, name: str) -> int | None:
        return None  # the child imported every module the rules let the check import: all in `modules`

    def attribute(self, node: int, attr: str) -> int | str | None:
        found = self.attributes[node].get(attr)
        if found is not None:
            return found
        return STOP if attr in self.stops.get(node, ()) else None

    def name(self, node: int) -> str:
        return self.names[node]

    def to_json(self, key: dict[str, str | None]) -> dict[str, Any]:
        return {"format": FORMAT, "key": key, "names": list(self.names), "attributes": list(self.attributes),
                "stops": {str(i): sorted(s) for i, s in self.stops.items()}, "modules": self.modules}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModuleIndex:
        return cls(names=tuple(data["names"]), attributes=tuple(data["attributes"]),
                   stops={int(i): frozenset(s) for i, s in data["stops"].items()}, modules=data["modules"])


def module_graph() -> ModuleGraph:
    """Live modules where torch is already imported, else the index (built or read once per process)."""
    return LiveModules() if "torch" in sys.modules else load_index()


# --- The parent's side: key, cache, child -----------------------------------------------------------

def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _rules_digest() -> str:
    from drkernel.gym.verdict import static

    rules = (static.ALLOWED_IMPORTS, sorted(static.FORBIDDEN), static.ALLOWED_REFERENCES, static.MODULE_PACKAGES)
    return hashlib.sha256(repr(rules).encode()).hexdigest()[:16]


def cache_key() -> dict[str, str | None]:
    """What the index depends on: a change to any of these builds a new one."""
    return dict(_cache_key())


@functools.cache
def _cache_key() -> tuple[tuple[str, str | None], ...]:  # read once: metadata lookups scan sys.path
    return (("format", str(FORMAT)), ("python", sys.version), ("prefix", sys.prefix), ("torch", _version("torch")),
            ("triton", _version("triton")), ("numpy", _version("numpy")), ("drkernel", _version("drkernel")),
            ("rules", _rules_digest()))


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "drkernel" / "module-index"


def cache_file(folder: Path, key: dict[str, str | None]) -> Path:
    """The index's file in ``folder``: named by a digest of its key (the file holds the key too)."""
    return folder / f"{hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]}.json"


_LOADED: dict[Path, ModuleIndex] = {}


def load_index(cache_dir: Path | None = None) -> ModuleIndex:
    """The index for this interpreter: from memory, else from the disk cache, else built by a child."""
    key = cache_key()
    path = cache_file(cache_dir or default_cache_dir(), key)
    if path in _LOADED:
        return _LOADED[path]
    index = _read(path, key)
    if index is None:
        data = _build_in_child(key)
        _write(path, data)
        index = ModuleIndex.from_json(data)
    _LOADED[path] = index
    return index


def _read(path: Path, key: dict[str, str | None]) -> ModuleIndex | None:
    """The cached index at ``path`` if it was built for ``key``; None when absent, stale or damaged."""
    try:
        data = json.loads(path.read_text())
        return ModuleIndex.from_json(data) if data.get("key") == key else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError as e:  # a read-only home: the index lives in memory for this process
        log.warning("module index not cached at %s: %s", path, e)


def _child_env() -> dict[str, str]:
    """Our environment with PYTHONPATH's relative entries made absolute (``PYTHONPATH=src`` means the
    caller's ``src``, not one under the child's empty folder) and the folder drkernel is imported from
    first, so the child imports the very package this process runs."""
    root = str(Path(__file__).resolve().parents[3])
    entries = [os.path.abspath(e) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([root, *entries]))}


def _build_in_child(key: dict[str, str | None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="drkernel-module-index-") as tmp:
        out = Path(tmp) / "index.json"
        cmd = [sys.executable, "-m", "drkernel.gym.verdict.module_index", str(out)]
        try:  # run in the empty folder: `-m` puts the working directory first on the child's path
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
                                  cwd=tmp, env=_child_env())
        except subprocess.TimeoutExpired as e:
            raise InfrastructureError(f"the module index took over {BUILD_TIMEOUT_S} s to build") from e
        try:
            data = json.loads(out.read_text())
        except (OSError, ValueError) as e:
            raise InfrastructureError(f"the module index child failed (exit {proc.returncode}): "
                                      f"{proc.stderr[-2000:]}") from e
    if data.get("key") != key:
        raise InfrastructureError(f"the module index child ran another environment: {data.get('key')} != {key}")
    return data


# --- The child's side: import, record, walk ---------------------------------------------------------

class _Recorder:
    """Each module as it is when first seen: its name, module-valued and other public attributes."""

    def __init__(self) -> None:
        self.number: dict[int, int] = {}
        self.modules: list[types.ModuleType] = []
        self.module_attrs: list[dict[str, types.ModuleType]] = []
        self.other_attrs: list[list[str]] = []

    def record_new(self) -> None:
        stack = [m for m in list(sys.modules.values()) if isinstance(m, types.ModuleType)]
        while stack:
            module = stack.pop()
            if id(module) in self.number:
                continue
            self.number[id(module)] = len(self.modules)
            self.modules.append(module)
            mods, others = {}, []
            for attr, value in list(vars(module).items()):
                if not isinstance(attr, str):
                    continue
                if isinstance(value, types.ModuleType):
                    mods[attr] = value
                    stack.append(value)
                elif value is not None and not attr.startswith("_"):
                    others.append(attr)
            self.module_attrs.append(mods)
            self.other_attrs.append(others)


def _import_quietly(name: str) -> types.ModuleType | None:
    try:
        return importlib.import_module(name)
    except (Exception, SystemExit):  # noqa: BLE001 - a broken optional module is absent, as in the check
        return None


def _walk_packages(recorder: _Recorder, modules: dict[str, types.ModuleType]) -> None:
    """Import, breadth first, each submodule of torch and triton the check would import on demand."""
    from drkernel.gym.verdict.static import MODULE_PACKAGES, _importable

    pending = sorted(n for n, m in modules.items() if n.split(".")[0] in MODULE_PACKAGES and hasattr(m, "__path__"))
    while pending:
        package = modules[pending.pop(0)]
        try:
            found = sorted(info.name for info in pkgutil.iter_modules(list(package.__path__)))
        except Exception:  # noqa: BLE001, S112 - a package whose path cannot be listed adds no submodules
            continue
        for sub in found:
            name = f"{package.__name__}.{sub}"
            if name in modules or not _importable(name):
                continue
            module = _import_quietly(name)
            if module is None:
                continue
            modules[name] = module
            recorder.record_new()
            if hasattr(module, "__path__"):
                pending.append(name)


def build_index() -> ModuleIndex:
    """Import every allowed module and the submodules the check may import; record the graph. Run in a
    child: it loads torch, triton and numpy into the calling process."""
    from drkernel.gym.verdict.static import ALLOWED_IMPORTS

    for name in ALLOWED_IMPORTS:
        _import_quietly(name)
    recorder = _Recorder()
    recorder.record_new()
    modules = {n: m for n, m in list(sys.modules.items()) if isinstance(m, types.ModuleType)}
    _walk_packages(recorder, modules)
    names = tuple(str(getattr(m, "__name__", "")) for m in recorder.modules)
    attributes = tuple({a: recorder.number[id(v)] for a, v in mods.items()} for mods in recorder.module_attrs)
    stops = {i: frozenset(a for a in others if f"{names[i]}.{a}" in modules)
             for i, others in enumerate(recorder.other_attrs)}
    return ModuleIndex(names=names, attributes=attributes, stops={i: s for i, s in stops.items() if s},
                       modules={n: recorder.number[id(m)] for n, m in modules.items()})


def main(out: str) -> None:
    """Build the index and write it to ``out``; exit at once (torch's native teardown can crash)."""
    data = build_index().to_json(cache_key())
    tmp = f"{out}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
