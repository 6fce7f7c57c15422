"""The memory watch's CPU share (`drkernel.gym.orchestrator.memory.RssWatch`) on real processes: a
process group that wants three cores is moved to SCHED_IDLE when the share is on, and left at normal
priority when it is off (a GPU candidate: a demotion would slow its timed calls)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

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
