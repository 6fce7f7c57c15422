"""Demotion of a child that wants more than its CPU share (the memory watch decides when:
`memory.RssWatch`): from then on it gets only CPU time no normal-priority process wants.

Three layers, because the kernel shares CPU at more than one level:

* every thread goes to ``SCHED_IDLE`` (new threads and processes inherit it): against the threads
  it competes with directly, it gets a weight of 3 to their 1024;
* every process goes into the idle cgroup (`idle_cgroup`: ``drkernel-idle`` beside our own cgroup
  in a writable ``cpu`` hierarchy, v1 ``cpu.shares`` 2 or v2 ``cpu.weight`` 1), where its children
  stay whatever sessions they start. Without it, a kernel with autogroups on
  (``kernel.sched_autogroup_enabled``) shares CPU between sessions first, each at its autogroup's
  weight whatever its threads' policies, so a child whose busy processes each start a session
  would get a share per session;
* where no such cgroup can be made (a container without a writable cgroup, an unprivileged user
  without delegation), each process's autogroup is set to nice 19 instead, and a warning says once
  that this is weaker: a process may set its own autogroup's nice back up to 0.

The child cannot leave ``SCHED_IDLE`` (that needs ``RLIMIT_NICE`` above 0 or ``CAP_SYS_NICE``; the
sandbox sets the limit to 0 and drops every capability) nor its cgroup (the sandbox mounts no
cgroup file system). No cgroup is needed for the first layer, so it holds in any container and in
the sandbox's nested namespaces; where even that is refused, the watch logs it once and bounds
memory only.
"""

from __future__ import annotations

import functools
import logging
import os

log = logging.getLogger(__name__)

IDLE_CGROUP = "drkernel-idle"
_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


def wanted_ns(pids: list[int]) -> dict[int, int]:
    """``tid -> nanoseconds running plus waiting to run`` of every thread of ``pids``."""
    out: dict[int, int] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                    run, wait = f.read().split()[:2]
            except (OSError, ValueError):
                continue
            out[int(tid)] = int(run) + int(wait)
    return out


def demote(pids: list[int]) -> bool:
    """Demote every process of ``pids`` (module docstring); False when the system refuses the
    first layer (logged once). Called again for processes started since: each step is idempotent."""
    if not hasattr(os, "SCHED_IDLE"):
        _warn_once("cpu", "SCHED_IDLE is not available here: a child's CPU share is not bounded")
        return False
    cgroup = idle_cgroup()
    for pid in pids:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        try:
            for tid in tids:
                if os.sched_getscheduler(tid) != os.SCHED_IDLE:
                    os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            if cgroup is None or not _join(cgroup, pid):
                _nicest_autogroup(pid)
        except ProcessLookupError:
            continue
        except OSError as e:
            _warn_once("cpu", "cannot lower a child's CPU priority (%s): its CPU share is not bounded", e)
            return False
    return True


def _join(cgroup: str, pid: int) -> bool:
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        return True
    except ProcessLookupError:
        raise
    except OSError as e:
        _warn_once("join", "cannot move a child into %s (%s): its autogroup is lowered instead", cgroup, e)
        return False


def _nicest_autogroup(pid: int) -> None:
    """Set the autogroup of ``pid`` to nice 19 (no file: autogroups are off)."""
    try:
        with open(f"/proc/{pid}/autogroup") as f:
            nice = int(f.read().split()[-1])
    except (FileNotFoundError, ValueError, IndexError):
        return
    if nice < 19:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write("19")


@functools.lru_cache(maxsize=None)
def idle_cgroup() -> str | None:
    """The idle cgroup's directory, made once per process (None where no ``cpu`` hierarchy is writable
    here, logged once: the fallback is weaker)."""
    mounts = _cpu_mounts()
    for version, mount in mounts:
        own = _own_cgroup(version)
        if own is None:
            continue
        base = os.path.join(mount, own.lstrip("/"))
        path = os.path.join(base, IDLE_CGROUP)
        try:
            if version == 2:  # the cpu controller must be enabled for our cgroup's children
                with open(os.path.join(base, "cgroup.subtree_control")) as f:
                    if "cpu" not in f.read().split():
                        continue
            os.makedirs(path, exist_ok=True)
            knob, value = ("cpu.shares", "2") if version == 1 else ("cpu.weight", "1")
            with open(os.path.join(path, knob), "w") as f:
                f.write(value)
            return path
        except OSError:
            continue
    log.warning("no writable cpu cgroup here (%s): a child over its CPU share gets SCHED_IDLE%s",
                [m for _, m in mounts] or "none mounted",
                " and a nice-19 autogroup, which a process of its own may set back to nice 0 (autogroups are "
                "on: sessions it starts then compete as sessions)" if _autogroups_on() else "")
    return None


def _autogroups_on() -> bool:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def _cpu_mounts() -> list[tuple[int, str]]:
    """``(version, mount point)`` of the cgroup hierarchies that may hold a ``cpu`` controller (v1
    first: where both exist, ``cpu`` is bound to v1)."""
    out: list[tuple[int, str]] = []
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, fs = left.split(), right.split()
        if len(parts) < 5 or len(fs) < 3:
            continue
        if fs[0] == "cgroup" and "cpu" in fs[2].split(","):
            out.insert(0, (1, parts[4]))
        elif fs[0] == "cgroup2":
            out.append((2, parts[4]))
    return out


def _own_cgroup(version: int) -> str | None:
    """Our cgroup's path in the v1 ``cpu`` hierarchy or in v2 (``/proc/self/cgroup``)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (version == 1 and "cpu" in controllers.split(",")) or (version == 2 and controllers == ""):
            return path
    return None
