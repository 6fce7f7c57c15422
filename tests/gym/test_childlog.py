"""A child's output through a pipe (`drkernel.gym.orchestrator.childlog`), with real processes: what is
kept is bounded whatever the child writes, what it wrote before exiting is all in the tail, and a log
closed under a child that still writes breaks its pipe instead of blocking it."""

from __future__ import annotations

import subprocess
import sys

from drkernel.gym.orchestrator.childlog import KEEP_BYTES, ChildLog

FLOOD = "import os\nfor _ in range(1024):\n    os.write(1, b'x' * 65535 + b'\\n')\nos.write(2, b'LAST LINE\\n')\n"


def _spawn(code: str, log: ChildLog) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=log.writer, stderr=log.writer)
    log.close_writer()
    return proc


def test_a_flood_is_counted_and_only_its_last_bytes_kept():
    log = ChildLog()
    try:
        assert _spawn(FLOOD, log).wait(60) == 0
        # 1024 lines of 64 KiB, then 10 bytes: 64 MiB + 10 counted, at most KEEP_BYTES shown
        whole = log.tail(KEEP_BYTES)
        assert log.total == (64 << 20) + 10
        assert whole.endswith(f"LAST LINE\n[{(64 << 20) + 10} bytes of output in all, the last {KEEP_BYTES} shown]")
        short = log.tail(100)
        assert short.splitlines()[-2:] == ["LAST LINE", f"[{(64 << 20) + 10} bytes of output in all, the last 100 shown]"]
    finally:
        log.close()


def test_output_that_fits_is_returned_whole_without_a_note():
    log = ChildLog()
    try:
        assert _spawn("print('hello'); import sys; print('world', file=sys.stderr)", log).wait(60) == 0
        assert log.tail(1000) == "hello\nworld\n"
    finally:
        log.close()


def test_a_closed_log_breaks_the_pipe_of_a_child_that_still_writes():
    log = ChildLog()
    proc = _spawn("import os\nwhile True:\n    os.write(1, b'x' * 4096)\n", log)
    log.close()
    assert proc.wait(60) != 0  # SIGPIPE or BrokenPipeError, not a write blocked forever
    # nothing the child wrote is kept (on a loaded host it may have written before the close: then only
    # the count's note remains)
    assert "x" not in log.tail(100)
