"""The orchestrator's side of one candidate (`drkernel.gym.orchestrator.session`): what it holds while the
candidate ends, and how it enters and leaves its timed region."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from drkernel.gym import Status
from drkernel.gym.ipc import Channel, channel_pair
from drkernel.gym.messages import Op, Signal, Timing
from drkernel.gym.orchestrator.pool import Talker, WarmPool, descendants, is_stopped, signal_tree
from drkernel.gym.orchestrator.runtime import RWLock, WarmUpGate
from drkernel.gym.orchestrator.session import KILL_GRACE_S, CandidateSession, Phase
from gym_cases import RELU_SOLUTION, request
from test_messages import STATS


def test_candidate_exit_and_judge_release_hold_the_device_lock(evaluator, monkeypatch):
    # A CUDA context torn down inside another candidate's timed region would land in its events, so
    # the exit runs while this session still holds the device: an exclusive request must wait for it.
    seen, writers = [], []
    finish = CandidateSession._finish

    def watched_finish(self, child):
        got_exclusive = threading.Event()
        writer = threading.Thread(target=lambda: (self.rt.rw.acquire_exclusive(), got_exclusive.set(),
                                                  self.rt.rw.release_exclusive()), daemon=True)
        writer.start()
        blocked = not got_exclusive.wait(0.3)
        seen.append((self.hold, blocked))
        writers.append((writer, got_exclusive))
        finish(self, child)

    monkeypatch.setattr(CandidateSession, "_finish", watched_finish)
    r = evaluator.evaluate(request(RELU_SOLUTION))
    assert r.status is Status.CORRECT
    assert seen == [("shared", True)]  # the exit ran under the shared hold, the writer waiting
    writer, got_exclusive = writers[0]
    writer.join(10)
    assert got_exclusive.is_set()  # and was let in once the session let go
    assert r.stage_seconds["child_exit"] > 0 and "judge_release" in r.stage_seconds


ORPHANING_RELU = RELU_SOLUTION.replace("import torch\n", '''import torch
import subprocess
import sys

# a spinner whose parent exits at once: it is re-parented inside the sandbox, out of its starter's tree
ORPHAN = "import os\\nif os.fork():\\n    os._exit(0)\\nwhile True: pass"
subprocess.Popen([sys.executable, "-c", ORPHAN]).wait()
''', 1)


def _pid_namespace_members(pid: int) -> list[int]:
    """Every host process in ``pid``'s pid namespace (an oracle apart from the tree walk)."""
    ns = os.readlink(f"/proc/{pid}/ns/pid")
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/ns/pid") == ns:
                    members.append(int(entry))
    return members


def test_an_orphaned_process_of_the_solution_is_stopped_too(boundary_only_evaluator, monkeypatch):
    # A candidate waiting for the device (its timed region, or the shared hold after it) is stopped,
    # its whole process tree. The attack on the tree walk: a process whose parent has exited is no
    # longer below its starter. Inside the sandbox it is re-parented to the namespace's init, which is
    # in the candidate's tree, so stopping the tree stops every process of the candidate's pid namespace.
    seen: dict = {}
    relay = CandidateSession._relay

    def watched_relay(self, child, msg, blob, fds):
        if not seen and getattr(msg, "trial", None) == 0:
            child.stop()
            try:
                inside = [child.pid, *descendants(child.pid)][-1]  # one in the candidate's namespace
                members = _pid_namespace_members(inside)
                seen.update(members=len(members), stopped=all(is_stopped(p) for p in members))
            finally:
                child.resume()
        return relay(self, child, msg, blob, fds)

    monkeypatch.setattr(CandidateSession, "_relay", watched_relay)
    r = boundary_only_evaluator.evaluate(request(ORPHANING_RELU, trials=3))
    assert r.status is Status.CORRECT, r.error
    assert seen["members"] >= 2 and seen["stopped"]  # the candidate and the orphaned spinner, stopped


def test_signal_tree_stops_a_process_tree_and_resumes_it(tmp_path):
    # a parent whose child forks a grandchild: all three stopped, then all three running again
    script = "import os, time\nif os.fork() == 0:\n    os.fork()\nwhile True: time.sleep(0.01)\n"
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 10
        while len(descendants(proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        tree = [proc.pid, *descendants(proc.pid)]
        assert len(tree) == 3
        assert signal_tree(proc.pid, signal.SIGSTOP) == 3
        assert all(is_stopped(p) for p in tree)
        signal_tree(proc.pid, signal.SIGCONT)
        deadline = time.monotonic() + 5
        while any(is_stopped(p) for p in tree) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not any(is_stopped(p) for p in tree)
    finally:
        for p in [*descendants(proc.pid), proc.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
        proc.wait()


WARMING_CHILD = """
import os, sys, time
from drkernel.gym.ipc import Channel
from drkernel.gym.messages import Ready
channel = Channel(int(sys.argv[1]))
channel.recv()  # go
for _ in range(150):  # a warm-up of 1.5 s (CUDA context, warm-up kernel), in small steps
    time.sleep(0.01)
channel.send(Ready(os.getpid()).to_header())
"""


class _Warming(Talker):
    """A real child that takes 1.5 s between ``go`` and ``ready``."""

    def __init__(self) -> None:
        ours, theirs = channel_pair()
        self.proc = subprocess.Popen([sys.executable, "-c", WARMING_CHILD, str(theirs)], pass_fds=[theirs],
                                     env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        os.close(theirs)
        self.channel, self.pid, self.log_path = Channel(ours), self.proc.pid, os.devnull

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout_s: float = 30.0, gate=None) -> None:
        """As a pool's child: let go through ``gate`` (this child asks for nothing first)."""
        gate(self, time.monotonic() + timeout_s)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.channel.close()

    def discard(self) -> None:
        self.kill()


def test_a_warm_up_never_overlaps_a_timed_region():
    # The warming child creates its CUDA context and launches its warm-up kernel between ``go`` and
    # ``ready``, under the device's shared hold: a region that starts waiting meanwhile gets the device
    # only once the child is ready.
    rw = RWLock()
    child = _Warming()
    events: list[str] = []
    went = threading.Event()
    send, recv = child.send, child.recv
    child.send = lambda header, *a: (send(header, *a), events.append("go"), went.set())
    child.recv = lambda deadline=None, max_fds=0: (msg := recv(deadline, max_fds), events.append("ready"))[0]

    def region():
        went.wait(10)
        with rw.exclusive():
            events.append("region")

    writer = threading.Thread(target=region)
    writer.start()
    msg = WarmUpGate(rw)(child, time.monotonic() + 30)
    writer.join(10)
    child.proc.wait(10)
    assert msg.op == "ready"
    assert events == ["go", "ready", "region"]


def test_a_refill_cut_short_by_the_pool_s_close_is_not_logged_as_a_failure(caplog):
    # At an evaluator's close the pool closes, then the zygote, whose forks die with it: a refill still
    # warming up then loses its channel. That is the close, not a candidate that failed to start.
    started: list[_Warming] = []
    went = threading.Event()

    def gate(child, deadline):
        child.send(Signal(Op.GO).to_header())
        went.set()
        return child.recv(deadline)

    pool = WarmPool("cpu", 1, {}, runner=None, gate=gate, spawn=lambda: started.append(_Warming()) or started[-1])
    assert went.wait(30)
    with caplog.at_level(logging.DEBUG, logger="drkernel.gym.orchestrator.pool"):
        pool.close()
        started[0].proc.kill()  # what closing the zygote does to its forks
        with pool._cond:
            assert pool._cond.wait_for(lambda: pool._starting == 0, timeout=30)
    records = [r for r in caplog.records if r.name == "drkernel.gym.orchestrator.pool"]
    assert [r.levelname for r in records] == ["DEBUG"], [r.getMessage() for r in records]
    assert "cut short by the pool's close" in records[0].getMessage()
    assert started[0].proc.poll() is not None and pool.ready_count == 0


class _Recorder:
    """The candidate as the session's handlers see it: what they send it and when they stop and resume it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def send(self, header: dict, blob: bytes = b"", fds=None) -> None:
        self.events.append(str(header["op"]))

    def stop(self) -> None:
        self.events.append("stop")

    def resume(self) -> None:
        self.events.append("resume")


@pytest.mark.parametrize("op", [Op.TIMING, Op.TIMING_SYNC])
def test_after_its_region_a_candidate_waits_stopped_until_it_holds_the_device_shared_again(op):
    # The candidate's next step copies its sampled timed outputs on the device. It used to get
    # ``continue`` while the session still waited for the shared hold, so that copy could run inside
    # the next candidate's region; now it is stopped until the hold is granted, then told to go on.
    rt = SimpleNamespace(rw=RWLock(), device_name="")
    job = {"trials": [{}], "hooks": [], "timing": True, "solution": "", "roofline_ms": None}
    session = CandidateSession(rt, job, "job", "kernelgym", 0, 60.0, 1 << 30)
    session.order.phase = Phase.TIMING
    rt.rw.join()
    rt.rw.enter_region()  # this candidate's region
    session.hold = "exclusive"
    child, seen = _Recorder(), {}

    def next_region():
        with rt.rw.exclusive():
            seen["during"] = list(child.events)
            time.sleep(0.2)

    writer = threading.Thread(target=next_region)
    writer.start()
    while not rt.rw.writers_waiting:
        time.sleep(0.001)
    t = time.monotonic()
    deadline = session._handle(child, Timing(op, STATS), t + 60)
    writer.join(10)
    assert seen["during"] == ["stop"]  # stopped, and not yet told to go on, while the next region ran
    assert child.events == ["stop", "resume", "continue"]
    assert session.hold == "shared" and deadline >= t + 60 + 0.2


STAYS_ALIVE = RELU_SOLUTION.replace("import torch\n", '''import torch
import os
import time

os._exit = lambda code: time.sleep(60)  # the harness's exit after ``done`` now keeps the process alive
''', 1)


def test_a_waiting_region_cuts_short_the_grace_a_finished_candidate_gets_to_exit(boundary_only_evaluator,
                                                                                 monkeypatch):
    # The grace before the kill holds the device shared. Alone, a candidate that stays alive after
    # ``done`` gets the whole grace; with a timed region waiting it is killed at once.
    spent = []
    finish = CandidateSession._finish

    def timed_finish(self, child, region=False):
        writer = None
        if region:
            rw = self.rt.rw
            writer = threading.Thread(target=lambda: (rw.acquire_exclusive(), rw.release_exclusive()),
                                      daemon=True)
            writer.start()
            while not self.rt.rw.writers_waiting:
                time.sleep(0.001)
        t = time.monotonic()
        finish(self, child)
        spent.append(time.monotonic() - t)
        return writer

    for region in (False, True):
        monkeypatch.setattr(CandidateSession, "_finish",
                            lambda self, child, region=region: timed_finish(self, child, region))
        r = boundary_only_evaluator.evaluate(request(STAYS_ALIVE))
        assert r.status is Status.CORRECT, r.error
    assert spent[0] >= KILL_GRACE_S  # no region waiting: the whole grace
    assert spent[1] < KILL_GRACE_S / 2  # a region waiting: killed at once


def test_a_waiting_region_blocks_new_shared_holds_until_it_has_run():
    rw = RWLock()
    rw.acquire_shared()
    ran = []
    region = threading.Thread(target=lambda: (rw.acquire_exclusive(), ran.append("region"), rw.release_exclusive()))
    region.start()
    while not rw.writers_waiting:
        time.sleep(0.001)
    late = threading.Thread(target=lambda: (rw.acquire_shared(), ran.append("shared"), rw.release_shared()))
    late.start()
    late.join(0.2)
    assert late.is_alive() and ran == []  # the new hold waits behind the region
    rw.release_shared()
    for t in (region, late):
        t.join(10)
        assert not t.is_alive()
    assert ran == ["region", "shared"]
