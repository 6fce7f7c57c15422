"""The memory watch's CPU share (`drkernel.gym.orchestrator.memory.RssWatch`) on real processes: a
process group that wants three cores is moved to SCHED_IDLE when the share is on, and left at normal
priority when it is off (a GPU candidate: a demotion would slow its timed calls). And the memory
limit a watch is given for request code (`drkernel.gym.orchestrator.evaluator.memory_limit`). And its
memory count of memfd files a process holds open or only mapped: each counted once, a holder past the
limit killed, one under it left alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from gym_cases import RELU_REFERENCE, RELU_SOLUTION, request

from drkernel.errors import JudgeError
from drkernel.gym import Status
from drkernel.gym.orchestrator.evaluator import memory_limit
from drkernel.gym.orchestrator.memory import CPU_WINDOW_S, RssWatch, group_memory_bytes, group_rss_bytes
from drkernel.gym.orchestrator.own_judge import mark_request_reference
from drkernel.problems.problem import Problem

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


MEMFD = "import mmap, os, sys, time\n" \
        "n = int(sys.argv[1]) << 20\n" \
        "fd = os.memfd_create('held')\n" \
        "for _ in range(n >> 20): os.write(fd, b'x' * (1 << 20))\n" \
        "dup = os.dup(fd)\n" \
        "m = mmap.mmap(fd, 4096)\n" \
        "if sys.argv[2] == 'mapped': os.close(fd); os.close(dup)\n" \
        "print('ready', flush=True)\n" \
        "time.sleep(60)\n"


def _holder(mib: int, how: str) -> subprocess.Popen:
    """A real process holding a memfd of ``mib`` MiB, written (never resident in it) and mapped 4 KiB;
    ``how``: "open" keeps two descriptors of it too, "mapped" closes them (the mapping keeps it)."""
    child = subprocess.Popen([sys.executable, "-c", MEMFD, str(mib), how], stdout=subprocess.PIPE,
                             start_new_session=True, text=True)
    assert child.stdout.readline() == "ready\n"
    return child


@pytest.mark.skipif(not hasattr(os, "memfd_create") or not os.path.isdir("/proc"), reason="Linux's memfd")
@pytest.mark.parametrize("how", ["open", "mapped"])
def test_a_memfd_counts_once_against_the_limit_and_its_holder_is_killed_past_it(how):
    child = _holder(256, how)
    try:
        rss = group_rss_bytes(child.pid)
        held = group_memory_bytes(child.pid)
        assert rss < 128 << 20  # the memfd's pages are not resident in its holder
        if how == "open" or os.access(f"/proc/{child.pid}/map_files", os.R_OK):
            # two descriptors and a mapping of one file: its 256 MiB once
            assert 256 << 20 <= held - rss <= (256 << 20) + (1 << 20)
        else:  # map_files unreadable: the 4 KiB mapping only
            assert held - rss >= 4096
        with RssWatch(child.pid, rss + (128 << 20), cpu_share=False) as watch:
            assert child.wait(timeout=30) == -signal.SIGKILL
        assert watch.fired and watch.peak >= 256 << 20
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


@pytest.mark.skipif(not hasattr(os, "memfd_create") or not os.path.isdir("/proc"), reason="Linux's memfd")
def test_a_memfd_under_the_limit_is_counted_and_its_holder_left_alone():
    child = _holder(64, "open")
    try:
        limit = group_rss_bytes(child.pid) + (256 << 20)
        with RssWatch(child.pid, limit, cpu_share=False) as watch:
            deadline = time.monotonic() + 30
            while watch.peak < 64 << 20 and time.monotonic() < deadline:  # until the watch read the memfd
                time.sleep(0.05)
        assert watch.peak >= 64 << 20
        assert not watch.fired and child.poll() is None
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _memfd_reference(mib: int) -> Problem:
    """The relu problem as a request's reference (run in its own judge, watched) that writes ``mib``
    MiB into a memfd it never maps and keeps."""
    hold = f"import os\n_held = os.memfd_create('held')\nfor _ in range({mib}):\n" \
           "    os.write(_held, b'x' * (1 << 20))\n"
    name = f"relu_memfd_{mib}"
    return Problem(name=name, level=1, code=RELU_REFERENCE + hold, problem_id=name, source="request",
                   metadata=mark_request_reference({}))


@pytest.mark.skipif(not hasattr(os, "memfd_create") or not os.path.isdir("/proc"), reason="Linux's memfd")
def test_a_request_reference_holding_a_memfd_is_held_to_its_limit(evaluator):
    """A real evaluation whose reference holds 64 MiB in a memfd passes under a 1 GiB limit; one that
    writes 1.5 GiB (none of it resident: the watch saw only its judge's resident size before) is
    killed at the limit, and its failure names it."""
    fits = evaluator.evaluate(request(RELU_SOLUTION, problem=_memfd_reference(64), rss_limit_mb=1024))
    assert fits.status is Status.CORRECT, fits.error
    with pytest.raises(JudgeError, match=r"passed its memory limit \(1024 MiB"):
        evaluator.evaluate(request(RELU_SOLUTION, problem=_memfd_reference(1536), rss_limit_mb=1024,
                                   timeout_s=120))


TREE = ("import subprocess, sys, threading, time\n"
        "sleep = [sys.executable, '-c', 'import time; time.sleep(60)']\n"
        "nest = [sys.executable, '-c', 'import subprocess, sys, time; subprocess.Popen(%r); time.sleep(60)' % (sleep,)]\n"
        "threading.Thread(target=lambda: subprocess.Popen(sleep)).start()  # a child of a second thread\n"
        "subprocess.Popen(nest)  # a child with a child of its own\n"
        "time.sleep(60)\n")


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux's /proc")
def test_the_tree_walk_finds_every_process_the_host_scan_finds():
    """`tree_rss` (each task's children lists: only the group's processes read) against `group_rss`
    (every process of the host): the same processes, a child started by a second thread and a
    grandchild included."""
    from drkernel.gym.orchestrator.memory import CHILDREN_LISTS, group_rss, tree_rss

    if not CHILDREN_LISTS:
        pytest.skip("this kernel lists no task's children (CONFIG_PROC_CHILDREN)")
    p = subprocess.Popen([sys.executable, "-c", TREE], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(group_rss(p.pid)) < 4 and time.monotonic() < deadline:  # the leader, 2 children, 1 grandchild
            time.sleep(0.1)
        scanned = group_rss(p.pid)
        assert len(scanned) == 4, scanned
        assert set(tree_rss([p.pid])) == set(scanned)
        assert all(b > 0 for b in tree_rss([p.pid]).values())
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
