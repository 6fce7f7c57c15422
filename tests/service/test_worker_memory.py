"""What a device worker keeps between evaluations is bounded by bytes, whatever clients send: each
distinct custom reference leaves a prepared problem (its scaled code) in the worker's runtime. And
the host memory a worker gives each slot's request code (`workers.worker_host_memory`, split by
`workers.start_evaluator`; enforced on a real server in ``test_hostile_gym``)."""

from __future__ import annotations

import collections
import os
import threading

import pytest
from service_server import DIRECTIVE

from drkernel.errors import ConfigError
from drkernel.gym.messages import Prepared
from drkernel.gym.orchestrator.runtime import PREPARED_CACHE_BYTES, DeviceRuntime
from drkernel.service.config import ServiceConfig
from drkernel.service.workers import (
    CPU_BUDGET_BYTES,
    HOST_MEMORY_FRACTION,
    start_evaluator,
    worker_host_memory,
)


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


def test_a_workers_host_memory_is_the_configured_one_else_its_budget_else_its_part_of_the_host():
    assert worker_host_memory("cpu", 3 << 30, 8 << 30) == 3 << 30  # configured: as given
    assert worker_host_memory("cpu", None, 8 << 30) == 8 << 30  # a CPU worker: its device budget
    assert worker_host_memory("cpu") == CPU_BUDGET_BYTES == 4 << 30
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    gpus = max(1, len([d for d in os.listdir("/dev") if d.startswith("nvidia") and d[6:].isdigit()]))
    assert worker_host_memory("cuda:0", None, 80 << 30) == int(HOST_MEMORY_FRACTION * physical) // gpus


def test_an_evaluator_that_cannot_bound_memory_reports_no_slot_share():
    """The directive evaluator has no ``limit_host_memory``: the worker says so (None, and a warning
    in its log) instead of claiming a bound it does not have."""
    _, info = start_evaluator(DIRECTIVE, "cpu", None, 2, 4 << 30)
    assert info["slot_memory_bytes"] is None and info["device_name"] == "directive test device"


def test_host_memory_bytes_must_be_positive():
    with pytest.raises(ConfigError, match="host_memory_bytes=0"):
        ServiceConfig(host_memory_bytes=0)
