"""Compiled kernels kept across evaluations of one solution, so a repeat does not compile again.

Triton compiles a kernel on its first launch in a process and writes the result (the binary, its
metadata, the launcher built for its signature) under ``TRITON_CACHE_DIR``, keyed by a hash of the
kernel's source, signature, constants, options and backend. Every candidate has a private cache in its
own tmpfs, dropped with it, so an evaluation of a solution seen before compiles everything again
(an autotuned GEMM: 1.4-1.75 s of an H100 evaluation, every time).

A cache every candidate could write would let one candidate plant a binary under a key another
solution's kernel looks up. This cache is **scoped**: what an evaluation's candidate compiled is kept
under the scope of the exact evaluation it made -- the solution's text, the reference's code, the
device and the library versions (`scope_key`) -- and seeded only into later candidates of the same
scope. Anything an entry could make a later evaluation do, the same solution could do inside one
evaluation (its private cache persists for the whole of it); no other solution's candidate ever
reads it. The harness's own kernel is compiled and loaded during the warm-up, before any seed is
written, so a seeded entry cannot replace it.

The candidate reports its new cache files with its final message (`messages.Done.compile_files`,
the bytes as the message's blob); they are untrusted bytes, checked here (relative names of a plain
shape, sizes, counts) before anything is written. A scope keeps at most ``max_scope_bytes``; the whole
cache at most ``max_total_bytes``, the least recently used scopes evicted first.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

MAX_SCOPE_BYTES = 64 << 20
MAX_TOTAL_BYTES = 2 << 30
MAX_FILES = 512
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}$")


def scope_key(solution: str, reference: str, device_name: str, versions: Mapping[str, str]) -> str:
    """The scope of an evaluation: what its compiled kernels may be reused for."""
    data = json.dumps([solution, reference, device_name, dict(sorted(versions.items()))])
    return hashlib.sha256(data.encode()).hexdigest()


def safe_name(rel: str) -> bool:
    """A relative file name of at most three plain parts (no ``..``, no absolute path, no odd bytes)."""
    parts = rel.split("/")
    return 0 < len(parts) <= 3 and all(_PART.match(p) and p not in (".", "..") for p in parts)


def pack(files: Mapping[str, bytes]) -> tuple[list[tuple[str, int]], bytes]:
    """Files as an index of ``(name, size)`` and one blob of their bytes in index order."""
    index = [(name, len(data)) for name, data in sorted(files.items())]
    return index, b"".join(files[name] for name, _ in index)


def unpack(index: Sequence[Sequence[object]], blob: bytes, max_bytes: int = MAX_SCOPE_BYTES) -> dict[str, bytes]:
    """The files an index and blob describe; `ValueError` for anything but plain names whose sizes
    add up to the blob, within ``max_bytes`` and `MAX_FILES`."""
    if len(index) > MAX_FILES:
        raise ValueError(f"{len(index)} files (at most {MAX_FILES})")
    files, at = {}, 0
    for entry in index:
        if len(entry) != 2 or not isinstance(entry[0], str) or type(entry[1]) is not int or entry[1] < 0:
            raise ValueError(f"index entry {entry!r}")
        name, size = entry
        if not safe_name(name) or name in files:
            raise ValueError(f"file name {name!r}")
        files[name] = blob[at:at + size]
        at += size
    if at != len(blob) or at > max_bytes:
        raise ValueError(f"{at} bytes indexed, {len(blob)} sent (at most {max_bytes})")
    return files


def new_files(root: str, before: set[str], max_bytes: int = MAX_SCOPE_BYTES) -> dict[str, bytes]:
    """Regular files under ``root`` not in ``before``, read until ``max_bytes`` (names relative to it)."""
    out: dict[str, bytes] = {}
    total = 0
    for rel in sorted(list_files(root) - before):
        path = os.path.join(root, rel)
        size = os.path.getsize(path)
        if total + size > max_bytes or len(out) >= MAX_FILES:
            break
        with open(path, "rb") as f:
            out[rel] = f.read(size)
        total += len(out[rel])
    return out


def list_files(root: str) -> set[str]:
    """Names (relative, plain) of the regular files under ``root``, symbolic links not followed."""
    found: set[str] = set()
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        for name in names:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            if os.path.isfile(path) and not os.path.islink(path) and safe_name(rel):
                found.add(rel)
    return found


def relocate(files: Mapping[str, bytes], root: str) -> dict[str, bytes]:
    """``files`` with Triton's group records (``__grp__*.json``: a kernel's files by absolute path)
    pointed at ``root``, where they are written; a record that is not such JSON is dropped (Triton then
    compiles, as without a cache)."""
    out = dict(files)
    for rel, data in files.items():
        if not os.path.basename(rel).startswith("__grp__"):
            continue
        try:
            record = json.loads(data)
            paths = record["child_paths"]
            record["child_paths"] = {name: os.path.join(root, os.path.dirname(rel), os.path.basename(str(path)))
                                     for name, path in paths.items()}
            out[rel] = json.dumps(record).encode()
        except (ValueError, KeyError, TypeError, AttributeError):
            del out[rel]
    return out


def _bytes_under(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def write_files(root: str, files: Mapping[str, bytes]) -> None:
    """Write ``files`` under ``root`` (names checked by `safe_name`; existing files are kept)."""
    for rel, data in files.items():
        if not safe_name(rel):
            raise ValueError(f"file name {rel!r}")
        path = os.path.join(root, rel)
        if os.path.exists(path):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


class CompileCache:
    """Scopes of compiled files under ``root`` (one folder each), bounded, least recently used out."""

    def __init__(self, root: str | os.PathLike, max_total_bytes: int = MAX_TOTAL_BYTES,
                 max_scope_bytes: int = MAX_SCOPE_BYTES) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        self.max_total_bytes, self.max_scope_bytes = max_total_bytes, max_scope_bytes
        self._lock = threading.Lock()
        self.hits = self.misses = self.stored_bytes = 0
        self._sizes = {d.name: _bytes_under(d) for d in self.root.iterdir()  # read once; kept up to date
                       if d.is_dir() and not d.name.startswith(".")}

    def _dir(self, key: str) -> Path:
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            raise ValueError(f"scope key {key!r}")
        return self.root / key

    def load(self, key: str) -> tuple[list[tuple[str, int]], bytes]:
        """The scope's files packed for a candidate (empty when the scope has none)."""
        scope = self._dir(key)
        with self._lock:
            if not scope.is_dir():
                self.misses += 1
                return [], b""
            os.utime(scope)  # most recently used
            self.hits += 1
            files = {rel: (scope / rel).read_bytes() for rel in list_files(str(scope))}
        return pack(files)

    def store(self, key: str, index: Sequence[Sequence[object]], blob: bytes) -> int:
        """Add a candidate's new files to the scope (existing names kept); returns the bytes added.
        `ValueError` when the index or blob is malformed: nothing is written then."""
        files = unpack(index, blob, max(MAX_SCOPE_BYTES, self.max_scope_bytes))
        if not files:
            return 0
        scope = self._dir(key)
        with self._lock:
            have = self._sizes.get(key, 0)
            room = self.max_scope_bytes - have
            keep = {}
            for rel, data in files.items():
                if len(data) <= room and not (scope / rel).exists():
                    keep[rel] = data
                    room -= len(data)
            if not keep:
                return 0
            staging = Path(tempfile.mkdtemp(dir=self.root, prefix=".in-"))
            try:
                write_files(str(staging), keep)
                self._merge(staging, scope)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            added = sum(len(d) for d in keep.values())
            self._sizes[key] = have + added
            self.stored_bytes += added
            self._evict()
        return added

    @staticmethod
    def _merge(staging: Path, scope: Path) -> None:
        """Move the staged files into the scope, each by rename (a reader sees a file whole or not)."""
        for rel in sorted(list_files(str(staging))):
            target = scope / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, target)
        os.utime(scope)

    def _evict(self) -> None:
        """With the lock held: drop the least recently used scopes until the cache fits."""
        total = sum(self._sizes.values())
        if total <= self.max_total_bytes:
            return
        for key in sorted(self._sizes, key=lambda k: (self.root / k).stat().st_mtime):
            if total <= self.max_total_bytes:
                break
            shutil.rmtree(self.root / key, ignore_errors=True)
            total -= self._sizes.pop(key)

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "stored_bytes": self.stored_bytes}
