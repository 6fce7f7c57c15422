"""What a device worker keeps between evaluations is bounded by bytes, whatever clients send: each
distinct custom reference leaves a prepared problem (its scaled code) in the worker's runtime."""

from __future__ import annotations

import collections
import threading

from drkernel.gym.messages import Prepared
from drkernel.gym.orchestrator.runtime import PREPARED_CACHE_BYTES, DeviceRuntime


def _kept_only() -> DeviceRuntime:
    """A runtime's cache of prepared problems alone (no judge is started)."""
    rt = object.__new__(DeviceRuntime)
    rt._prepared, rt._prepared_bytes, rt._prepared_lock = collections.OrderedDict(), 0, threading.Lock()
    return rt


def test_prepared_problems_are_kept_within_their_bytes_least_recently_used_first():
    rt = _kept_only()
    size = 1 << 20
    n = 2 * PREPARED_CACHE_BYTES // size  # twice what fits
    for i in range(n):
        rt._remember_prepared((i,), Prepared("x" * size, "y" * 10, 0, None, None))
    assert rt._prepared_bytes <= PREPARED_CACHE_BYTES
    assert rt._prepared_bytes == sum(len(p.code) + len(p.second_code) + 4096 for p in rt._prepared.values())
    assert (n - 1,) in rt._prepared and (1,) not in rt._prepared
    assert len(rt._prepared) < n // 2 + 1
