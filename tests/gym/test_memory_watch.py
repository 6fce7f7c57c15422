"""The memory watch's CPU share (`drkernel.gym.orchestrator.memory.RssWatch`) on real processes: a
process group that wants three cores is moved to SCHED_IDLE when the share is on, and left at normal
priority when it is off (a GPU candidate: a demotion would slow its timed calls). And the memory
limit a watch is given for request code (`drkernel.gym.orchestrator.evaluator.memory_limit`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from drkernel.gym.orchestrator.evaluator import memory_limit
from drkernel.gym.orchestrator.memory import CPU_WINDOW_S, RssWatch

SPIN = "import multiprocessing as m, time\n" \
       "def spin():\n    t = time.time() + 60\n    while time.time() < t: pass\n" \
       "if __name__ == '__main__':\n    [m.Process(target=spin).start() for _ in range(3)]\n    spin()\n"


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE") or not os.path.isdir("/proc"), reason="Linux's scheduler")
@pytest.mark.parametrize("cpu_share", [True, False])
def test_a_group_wanting_more_than_its_share_is_demoted_only_where_the_share_is_on(cpu_share):
    child = subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)
    try:
        with RssWatch(child.pid, 1 << 40, cpu_share=cpu_share) as watch:
            # on: demoted within a few windows of spinning; off: four windows of four spinning processes
            deadline = time.monotonic() + (6 * CPU_WINDOW_S + 5 if cpu_share else 4 * CPU_WINDOW_S)
            while not watch.demoted and time.monotonic() < deadline:
                time.sleep(0.1)
            idle = os.sched_getscheduler(child.pid) == os.SCHED_IDLE
        assert watch.demoted is cpu_share and idle is cpu_share
    finally:
        os.killpg(child.pid, 9)
        child.wait()


@pytest.mark.parametrize("asked_mb, share, own_judge, limit_mb, set_by", [
    (16384, None, False, 16384, "request"),  # no share given (a gym outside a service): the request's
    (16384, 2 << 30, False, 2048, "share"),  # 16 GiB asked, a 2 GiB slot share: 2 GiB
    (16384, 2 << 30, True, 1024, "share"),   # beside a reference's own judge: half of 2 GiB each
    (512, 2 << 30, True, 512, "request"),    # asked less than the half: what was asked
    (1024, 2 << 30, True, 1024, "request"),  # asked exactly the half: the request's (nothing was cut)
])
def test_the_limit_of_request_code_is_the_smaller_of_the_request_and_the_slot_share(
        asked_mb, share, own_judge, limit_mb, set_by):
    limit, source = memory_limit(asked_mb, share, own_judge)
    assert limit == limit_mb << 20
    assert ("rss_limit_mb" in source) is (set_by == "request")
    assert (f"the request asked {asked_mb} MB" in source) is (set_by == "share")
    assert ("halved" in source) is (set_by == "share" and own_judge)
