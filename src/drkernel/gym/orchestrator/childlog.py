"""A child's output (its stderr, and its stdout, which its boot points there), captured through a pipe.

Every child (a judge, a fresh candidate, a zygote's fork, the zygote itself) writes into a pipe whose
reading end stays here. One thread drains every such pipe and keeps the last `KEEP_BYTES` of each in
memory, counting and dropping what came before; `ChildLog.tail` says how much there was. So a
solution that floods its output costs its own CPU time and a bounded buffer of ours, never host disk,
and a process of ours that dies (a worker killed by the watchdog, ``kill -9``) leaves nothing
behind: a pipe goes with the last process that holds it.

The drainer reads at most `ROUND_READS` chunks of one pipe before it looks at the others, so a child
that writes without pause cannot keep the others' pipes full (a full pipe would block their writes).
"""

from __future__ import annotations

import logging
import os
import selectors
import threading

log = logging.getLogger(__name__)

KEEP_BYTES = 1 << 20
"""The last bytes of a child's output kept in memory; what came before is counted, then dropped."""
READ_BYTES = 1 << 16
ROUND_READS = 4
"""Chunks read from one pipe per turn of the drainer."""
FINAL_READS = 64
"""Chunks `ChildLog.tail` reads itself: more than a pipe holds (64 KiB by default, 1 MiB at most
unprivileged), so everything a child wrote before it exited is in the tail."""


class ChildLog:
    """One child's output pipe. ``writer`` goes to the child (`close_writer` once the child holds it);
    the reading end stays with the drainer until `close`."""

    def __init__(self) -> None:
        self._reader, self.writer = os.pipe()  # both close-on-exec; the spawn dup2s the writer for the child
        os.set_blocking(self._reader, False)
        self._lock = threading.Lock()
        self._buf = bytearray()
        self.total = 0  # bytes the child wrote, kept or not
        _DRAINER.add(self._reader, self)

    def close_writer(self) -> None:
        """Our copy of the writing end: closed once the child holds its own, so that the pipe ends
        when the child's processes do."""
        if self.writer >= 0:
            os.close(self.writer)
            self.writer = -1

    def drain(self, reads: int = ROUND_READS) -> bool:
        """Read up to ``reads`` chunks of what the pipe holds now; False once it has ended (every writer
        gone) or was closed."""
        with self._lock:
            for _ in range(reads):
                if self._reader < 0:
                    return False
                try:
                    chunk = os.read(self._reader, READ_BYTES)
                except BlockingIOError:
                    return True
                except OSError:
                    chunk = b""
                if not chunk:
                    self._close_reader()
                    return False
                self.total += len(chunk)
                self._buf += chunk
                if len(self._buf) > 2 * KEEP_BYTES:  # trimmed in halves: amortised O(1) a byte
                    del self._buf[:-KEEP_BYTES]
            return True

    def tail(self, n: int) -> str:
        """The last ``n`` bytes (at most `KEEP_BYTES`) of the output, then, when any came before, a
        line that says how much there was (last, so that a reader keeping the last lines keeps it).
        Reads what the pipe still holds first."""
        self.drain(FINAL_READS)
        with self._lock:
            data = bytes(self._buf[-n:]) if n > 0 else b""
            total = self.total
        text = data.decode(errors="replace")
        if total == len(data):
            return text
        return text.rstrip("\n") + f"\n[{total} bytes of output in all, the last {len(data)} shown]"

    def close(self) -> None:
        """Drop the pipe and the buffer (the child is gone, or no longer ours)."""
        self.close_writer()
        with self._lock:
            self._close_reader()
            self._buf = bytearray()

    def _close_reader(self) -> None:
        if self._reader >= 0:
            _DRAINER.remove(self._reader, self)
            os.close(self._reader)
            self._reader = -1


class _Drainer:
    """The one thread that reads every child's pipe (started with the first)."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, fd: int, owner: ChildLog) -> None:
        with self._lock:
            self._selector.register(fd, selectors.EVENT_READ, owner)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="child-log-drainer", daemon=True)
                self._thread.start()

    def remove(self, fd: int, owner: ChildLog) -> None:
        """Unregister ``fd`` if ``owner`` still holds it (called before the descriptor is closed, so
        a later pipe given the same number is never unregistered by mistake)."""
        with self._lock:
            try:
                if self._selector.get_key(fd).data is owner:
                    self._selector.unregister(fd)
            except KeyError:
                pass

    def _run(self) -> None:
        while True:
            try:
                events = self._selector.select(timeout=1.0)
            except OSError as e:  # only our own descriptors are registered: a bug, said loudly
                log.error("the child-log drainer's select failed: %s", e)
                events = []
            for key, _ in events:
                key.data.drain()


_DRAINER = _Drainer()
