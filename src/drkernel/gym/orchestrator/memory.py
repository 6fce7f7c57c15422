"""Host memory cap and CPU share for a child that runs request code (a candidate, or a request's
reference in its own judge), by watching its processes (not ``RLIMIT_AS``, which breaks CUDA
initialisation: the driver reserves far more address space than it uses).

A watcher thread finds every process in the child's process group and every descendant of its
leader (the sandbox's processes) ten times a second, and:

* **memory**: sums their resident size and the bytes stored in the tmpfs mounts of their own mount
  namespaces (the private ``/tmp`` and ``/dev/shm`` of the sandbox: tmpfs pages are host memory
  that no resident size shows), and kills the group when the sum passes the limit (killing bwrap,
  the leader, takes its whole pid namespace along). A tmpfs file the child also maps counts twice
  (once resident, once stored): the count errs against the child, never for it;
* **CPU share** (``cpu_share``; off for a GPU candidate, whose timed calls a demotion would slow:
  its launches wait behind every normal-priority process, past what the head start hides, and no
  H100 run has measured what demotion costs there): a child whose threads wanted more than ``CPU_SHARE_CORES`` cores over a window of
  ``CPU_WINDOW_S`` is demoted for the rest of its life (`cpushare.demote`): it then gets only CPU
  time no normal-priority process wants, so eight busy processes of one request cannot take a core
  from another request's single one, while on an idle host it still runs at full speed. "Wanted" is
  time running plus time waiting to run (``/proc/<pid>/task/<tid>/schedstat``), so a host busy with
  other work does not hide a hog: eight busy threads want eight cores however few they get.

Linux ``/proc`` only; elsewhere the watch is a no-op.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time

from drkernel.gym.orchestrator.cpushare import demote, wanted_ns

log = logging.getLogger(__name__)

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
CPU_SHARE_CORES = 1.5
"""Cores a child may want (running or runnable) at normal priority, averaged over a window (one
core, with room for a short-lived helper thread)."""
CPU_WINDOW_S = 1.0
_warned = False


def group_rss(pgid: int) -> dict[int, int]:
    """``pid -> resident bytes`` of the processes in process group ``pgid`` and of every descendant of
    process ``pgid`` (under the sandbox the child runs in a session of its own inside bwrap's pid
    namespace, so it is a descendant of the group's leader, not a member of its group)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    rss: dict[int, int] = {}
    children: dict[int, list[int]] = {}
    members: list[int] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # fields after the ")" that closes the command name: state ppid pgrp ... rss is field 24
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) <= 21:
            continue
        rss[int(pid)] = int(fields[21]) * PAGE
        children.setdefault(int(fields[1]), []).append(int(pid))
        if int(fields[2]) == pgid:
            members.append(int(pid))
    seen: set[int] = set()
    todo = [pgid, *members]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, ()))
    return {pid: rss[pid] for pid in seen if pid in rss}


def group_rss_bytes(pgid: int) -> int:
    """Resident bytes of the group (see `group_rss`)."""
    return sum(group_rss(pgid).values())


def _mount_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def tmpfs_bytes(pids: list[int]) -> int:
    """Bytes stored in the writable tmpfs mounts that ``pids`` see in mount namespaces other than
    ours (a sandbox's private ``/tmp`` and ``/dev/shm``), each mount counted once. Read through
    ``/proc/<pid>/root``; a mount we may not read counts 0 (logged once)."""
    own, seen_ns, seen_dev, total = _mount_ns("self"), set(), set(), 0
    for pid in pids:
        ns = _mount_ns(pid)
        if ns is None or ns == own or ns in seen_ns:
            continue
        seen_ns.add(ns)
        try:
            with open(f"/proc/{pid}/mountinfo") as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        top: dict[str, str] = {}  # mount point -> device of the mount on top (later lines cover earlier)
        for line in lines:
            left, _, right = line.partition(" - ")
            parts, fs = left.split(), right.split()
            if len(parts) >= 6 and fs and fs[0] == "tmpfs" and "rw" in parts[5].split(","):
                top[_unescape(parts[4])] = parts[2]
        for point, dev in top.items():
            if dev in seen_dev:
                continue
            seen_dev.add(dev)
            try:
                st = os.statvfs(f"/proc/{pid}/root{point}")
            except OSError as e:
                _warn_tmpfs(point, e)
                continue
            total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total


def _unescape(path: str) -> str:
    """A mount point as ``mountinfo`` writes it (space, tab, newline and backslash as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def _warn_tmpfs(point: str, e: OSError) -> None:
    global _warned
    if not _warned:
        _warned = True
        log.warning("cannot read a child's tmpfs %s (%s): its stored bytes are not counted against its "
                    "memory limit", point, e)


def group_memory_bytes(pgid: int) -> int:
    """What the group holds of host memory: resident bytes plus its private tmpfs contents."""
    rss = group_rss(pgid)
    return sum(rss.values()) + tmpfs_bytes(list(rss))


class RssWatch:
    """Kill process group ``pgid`` once its host memory (resident plus private tmpfs) exceeds
    ``limit_bytes``; move it to ``SCHED_IDLE`` once it uses more than its CPU share (module docstring)."""

    def __init__(self, pgid: int, limit_bytes: int, interval_s: float = 0.1, cpu_share: bool = True) -> None:
        self.pgid = pgid
        self.limit = limit_bytes
        self.cpu_share = cpu_share  # demote past the CPU share (False: memory only)
        self.interval = interval_s
        self.fired = False
        self.demoted = False
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-watch-{pgid}", daemon=True)

    def __enter__(self) -> "RssWatch":
        if os.path.isdir("/proc"):
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        window_t, wanted, used, bounded = time.monotonic(), None, 0, True
        while not self._stop.wait(self.interval):
            rss = group_rss(self.pgid)
            pids = list(rss)
            held = sum(rss.values()) + tmpfs_bytes(pids)
            self.peak = max(self.peak, held)
            if held > self.limit:
                self.fired = True
                try:
                    os.killpg(self.pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
            if not self.cpu_share:
                continue
            if self.demoted:
                bounded = bounded and demote(pids)  # threads and processes started since
                continue
            now_wanted, now = wanted_ns(pids), time.monotonic()
            if wanted is None:  # the first look: what the child did before the watch is not counted
                window_t, wanted = now, now_wanted
                continue
            used += sum(ns - wanted.get(tid, 0) for tid, ns in now_wanted.items())  # a new thread: its life
            wanted = now_wanted
            if now - window_t >= CPU_WINDOW_S:
                if used / 1e9 > CPU_SHARE_CORES * (now - window_t):
                    self.demoted = True
                    bounded = demote(pids)
                window_t, used = now, 0
