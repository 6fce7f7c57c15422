"""Host memory cap for candidate children, by watching resident size (not ``RLIMIT_AS``, which
breaks CUDA initialisation: the driver reserves far more address space than it uses).

A watcher thread sums the resident size of every process in the candidate's process group and of
every descendant of its leader (the sandbox's processes), and kills the group when the sum passes
the limit (killing bwrap, the leader, takes its whole pid namespace along). Linux ``/proc`` only;
elsewhere the watch is a no-op.
"""

from __future__ import annotations

import os
import signal
import threading

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def group_rss_bytes(pgid: int) -> int:
    """Resident bytes of the processes in process group ``pgid`` and of every descendant of process
    ``pgid`` (under the sandbox the candidate runs in a session of its own inside bwrap's pid
    namespace, so it is a descendant of the group's leader, not a member of its group)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return 0
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
    return sum(rss.get(pid, 0) for pid in seen)


class RssWatch:
    """Kill process group ``pgid`` once its resident size exceeds ``limit_bytes``."""

    def __init__(self, pgid: int, limit_bytes: int, interval_s: float = 0.1) -> None:
        self.pgid = pgid
        self.limit = limit_bytes
        self.interval = interval_s
        self.fired = False
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
        while not self._stop.wait(self.interval):
            rss = group_rss_bytes(self.pgid)
            self.peak = max(self.peak, rss)
            if rss > self.limit:
                self.fired = True
                try:
                    os.killpg(self.pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
