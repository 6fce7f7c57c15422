"""Cache of reference timings, keyed by what changes them: the problem (as run, after scaling),
the seeds and the timing inputs' distribution (`drkernel.gym.seeds.distribution_of`: the timed calls
draw one at random, and the reference is timed on the same one), the GPU model, the library versions
and the timing configuration.

In memory always; also as one JSON file per key under ``directory`` when one is given, so a
restarted worker does not re-time references.
"""

from __future__ import annotations

import hashlib
import json
import os
import contextlib
import threading
from pathlib import Path
from typing import Any, Iterator, Mapping

from drkernel.gym.seeds import distribution_of

TIMING_FIELDS = ("warmup_calls", "timed_calls", "l2_flush", "reference", "head_start_max_ms", "timed_calls_max",
                 "timing_target_rse", "timing_budget_ms", "timed_calls_min", "timing_rule", "timing_precision")


def reference_key(code: str, weight_seed: int, timing_seed: int, device_name: str, versions: Mapping[str, str],
                  config: Mapping[str, Any]) -> str:
    parts = {"code": code, "weight_seed": weight_seed, "timing_seed": timing_seed,
             "distribution": int(distribution_of(timing_seed)), "device": device_name,
             "versions": dict(sorted(versions.items())), **{k: config[k] for k in TIMING_FIELDS}}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


class ReferenceTimingCache:
    def __init__(self, directory: str | os.PathLike | None = None) -> None:
        self.directory = Path(directory) if directory else None
        self._mem: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._timing: dict[str, threading.Lock] = {}  # key -> held while one caller times it
        if self.directory:
            self.directory.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            if key in self._mem:
                return self._mem[key]
        if self.directory and (self.directory / f"{key}.json").exists():
            stats = json.loads((self.directory / f"{key}.json").read_text())
            with self._lock:
                self._mem[key] = stats
            return stats
        return None

    def put(self, key: str, stats: Mapping[str, Any]) -> None:
        with self._lock:
            self._mem[key] = dict(stats)
        if self.directory:
            tmp = self.directory / f".{key}.{os.getpid()}.tmp"
            tmp.write_text(json.dumps(dict(stats)))
            tmp.replace(self.directory / f"{key}.json")

    @contextlib.contextmanager
    def timing(self, key: str) -> Iterator[dict[str, Any] | None]:
        """Single flight: yields the cached stats, or None to the one caller that must time ``key`` and
        `put` them; other callers of the same key wait for it and then get its stats (another key
        does not wait). A caller that fails without putting lets the next waiter time it."""
        with self._lock:
            lock = self._timing.setdefault(key, threading.Lock())
        with lock:
            yield self.get(key)

    def __len__(self) -> int:
        return len(self._mem)
