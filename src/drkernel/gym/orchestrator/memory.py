"""Host memory cap and CPU share for a child that runs request code (a candidate, or a request's
reference in its own judge), by watching its processes (not ``RLIMIT_AS``, which breaks CUDA
initialisation: the driver reserves far more address space than it uses).

A watcher thread finds every descendant of the child's leader (the sandbox's processes) ten times a
second through the kernel's lists of each task's children (`tree_rss`: the group's own processes are
read, not the host's), and every process of its process group once a second (`group_rss`), and:

* **memory**: sums their resident size and the bytes stored in the tmpfs mounts of their own mount
  namespaces (the private ``/tmp`` and ``/dev/shm`` of the sandbox: tmpfs pages are host memory
  that no resident size shows) and in the memory-backed files its processes hold open or mapped
  (``memfd_create`` files, which live in the kernel's internal shm mount, and ``/dev/shm`` files
  outside those mounts: `shared_file_bytes`, read every ``SHARED_EVERY`` looks), and kills the
  group when the sum passes the limit (killing bwrap, the leader, takes its whole pid namespace
  along). A file the child also maps counts twice (once resident, once stored): the count errs
  against the child, never for it. The harness's own descriptors are not such files (a GPU
  candidate's staging buffer is device memory that the CUDA driver exports, `harness.vmm`, a
  descriptor of no memory-backed file; a CPU candidate's outputs travel as message bytes). Not
  counted: a memory-backed file reachable by neither a descriptor nor a mapping of the group (one
  passed to a process outside it), and, where ``/proc/<pid>/map_files`` is unreadable (no
  ``CAP_SYS_ADMIN``), the part of a mapped file beyond its mappings;
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
from collections.abc import Collection

from drkernel.gym.orchestrator.cpushare import demote, wanted_ns

log = logging.getLogger(__name__)

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
CPU_SHARE_CORES = 1.5
"""Cores a child may want (running or runnable) at normal priority, averaged over a window (one
core, with room for a short-lived helper thread)."""
CPU_WINDOW_S = 1.0
SHARED_EVERY = 3
"""The watch reads the group's descriptors and mappings (`shared_file_bytes`) every this many looks
(resident size and tmpfs every look)."""
_warned = False


def group_rss(pgid: int) -> dict[int, int]:
    """``pid -> resident bytes`` of the processes in process group ``pgid`` and of every descendant of
    process ``pgid`` (under the sandbox the child runs in a session of its own inside bwrap's pid
    namespace, so it is a descendant of the group's leader, not a member of its group). Reads every
    process of the host (`tree_rss` reads only the group's)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    rss: dict[int, int] = {}
    children: dict[int, list[int]] = {}
    members: list[int] = []
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is None:
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


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the ")" that closes the command name (state ppid pgrp
    ...; the resident pages are index 21), or None for a process gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields if len(fields) > 21 else None


CHILDREN_LISTS = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")
"""Whether this kernel lists each task's children (``/proc/<pid>/task/<tid>/children``,
``CONFIG_PROC_CHILDREN``); without it `tree_rss` falls back to `group_rss`."""
SCAN_EVERY = 10
"""`RssWatch` reads the whole host's processes (`group_rss`: the group's members outside its
leader's tree) every this many looks, and only the group's tree (`tree_rss`) in between."""


def tree_rss(roots: Collection[int]) -> dict[int, int]:
    """``pid -> resident bytes`` of ``roots`` and their descendants, found through each task's list of
    children: the group's own processes and threads are read, not every process of the host (whose
    scan, ten times a second for each of eight candidates, held the orchestrator's interpreter about
    one core's worth on an H100 host: py-spy, 2026-11-27). A process forked during the walk shows at
    the next look, as with a scan."""
    rss: dict[int, int] = {}
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in rss:
            continue
        fields = _stat_fields(pid)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        if fields is None:
            continue
        rss[pid] = int(fields[21]) * PAGE
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                    todo.extend(int(c) for c in f.read().split())
            except OSError:
                continue
    return rss


def group_rss_bytes(pgid: int) -> int:
    """Resident bytes of the group (see `group_rss`)."""
    return sum(group_rss(pgid).values())


def _mount_ns(pid: int | str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def tmpfs_bytes(pids: list[int]) -> tuple[int, set[int]]:
    """Bytes stored in the writable tmpfs mounts that ``pids`` see in mount namespaces other than
    ours (a sandbox's private ``/tmp`` and ``/dev/shm``), each mount counted once, and the devices
    (``st_dev``) of those mounts. Read through ``/proc/<pid>/root``; a mount we may not read counts 0
    (logged once)."""
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
    return total, {_dev(d) for d in seen_dev}


def _dev(major_minor: str) -> int:
    """``st_dev`` of a device written ``major:minor`` (``mountinfo``; hexadecimal in ``maps``: pass
    it through `_hex_dev`)."""
    major, _, minor = major_minor.partition(":")
    return os.makedev(int(major), int(minor))


def _hex_dev(major_minor: str) -> int:
    major, _, minor = major_minor.partition(":")
    return os.makedev(int(major, 16), int(minor, 16))


def _shared_file(target: str) -> bool:
    """A path of a memory-backed file that no mount of the child's shows: a ``memfd_create`` file
    (the kernel's internal shm mount) or one in ``/dev/shm``."""
    return target.startswith(("/memfd:", "/dev/shm/"))


def shared_file_bytes(pids: list[int], counted_devs: Collection[int] = ()) -> int:
    """Bytes allocated (``st_blocks * 512``) to the memory-backed files (`_shared_file`) that ``pids``
    hold open (``/proc/<pid>/fd``) or mapped (``/proc/<pid>/maps``), each file (device, inode) once;
    files on ``counted_devs`` (the tmpfs mounts `tmpfs_bytes` counted whole) are left out. Such a
    file's pages are host memory that no resident size shows until mapped and touched. A process
    whose ``/proc`` entries we may not read counts 0."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for pid in pids:
        total += _open_files(pid, seen, counted_devs) + _mapped_files(pid, seen, counted_devs)
    return total


def _open_files(pid: int, seen: set[tuple[int, int]], counted_devs: Collection[int]) -> int:
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if not _shared_file(os.readlink(path)):
                continue
            st = os.stat(path)
        except OSError:
            continue
        key = (st.st_dev, st.st_ino)
        if key not in seen and st.st_dev not in counted_devs:
            seen.add(key)
            total += st.st_blocks * 512
    return total


def _mapped_files(pid: int, seen: set[tuple[int, int]], counted_devs: Collection[int]) -> int:
    """Mapped files of `_shared_file` (a memfd whose descriptor was closed lives on in its mapping).
    Sized through ``/proc/<pid>/map_files`` where we may read it, else by the mapping's length."""
    total = 0
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = [line.split(maxsplit=5) for line in f if "/memfd:" in line or "/dev/shm/" in line]
    except OSError:
        return 0
    for fields in lines:
        if len(fields) < 6 or not _shared_file(fields[5]):
            continue
        key = (_hex_dev(fields[3]), int(fields[4]))
        if key in seen or key[0] in counted_devs:
            continue
        seen.add(key)
        try:
            total += os.stat(f"/proc/{pid}/map_files/{fields[0]}").st_blocks * 512
        except OSError:
            start, _, end = fields[0].partition("-")
            total += int(end, 16) - int(start, 16)
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
    """What the group holds of host memory: resident bytes, its private tmpfs contents, and the
    memory-backed files it holds open or mapped (`shared_file_bytes`)."""
    rss = tree_rss([pgid]) if CHILDREN_LISTS else group_rss(pgid)
    stored, devs = tmpfs_bytes(list(rss))
    return sum(rss.values()) + stored + shared_file_bytes(list(rss), devs)


class RssWatch:
    """Kill process group ``pgid`` once its host memory (resident, private tmpfs, memory-backed files) exceeds
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
        looks, shared, members = 0, 0, [self.pgid]
        while not self._stop.wait(self.interval):
            if looks % SCAN_EVERY == 0 or not CHILDREN_LISTS:  # the group's members outside the tree too
                rss = group_rss(self.pgid)
                members = list(rss)
            else:
                rss = tree_rss(members)
            pids = list(rss)
            stored, devs = tmpfs_bytes(pids)
            if looks % SHARED_EVERY == 0:  # every descriptor and mapping: a slower look
                shared = shared_file_bytes(pids, devs)
            looks += 1
            held = sum(rss.values()) + stored + shared
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
                    bounded = demote(pids)
                    self.demoted = True  # after the demotion: a reader of the flag finds it done
                window_t, used = now, 0
