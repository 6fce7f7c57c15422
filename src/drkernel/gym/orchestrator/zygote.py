"""The orchestrator's side of the zygote (`drkernel.gym.candidate.zygote`, issue 14): `Zygote` keeps
one zygote child per device and forks warm candidates from it; `ForkedChild` is one such candidate,
with the same interface as a fresh `Child` (the warm pool and the session cannot tell them apart).

A forked candidate lives in a pid namespace nested inside the zygote's sandbox, so its pid there
means nothing here. It sends a pidfd of itself with its first message (``init``, before any job
exists); through it the orchestrator reads its pid in our namespace (for the RSS watch), tests
whether it runs, and kills it. Its exit status comes from A, the trusted process between the zygote
and the candidate, over a socket of its own, so the candidate cannot report a status for itself.
"""

from __future__ import annotations

import contextlib
import logging
import select
import signal
import socket
import struct
import threading
import time

from drkernel.errors import InfrastructureError
from drkernel.gym.ipc import Channel, ChannelClosed, ChannelTimeout, channel_pair, close_fds
from drkernel.gym.messages import LANDLOCK_MIN_ABI, Fork, Op, Ready, Signal
from drkernel.gym.orchestrator.childlog import ChildLog
from drkernel.gym.orchestrator.pool import START_TIMEOUT_S, Child, Gate, Talker, let_go
from drkernel.gym.orchestrator.sandbox import CANDIDATE_LIMITS, Runner, SandboxUnavailable

log = logging.getLogger(__name__)
FORK_TIMEOUT_S = 30.0


class ForkedChild(Talker):
    """One candidate forked by a `Zygote` (the `Child` interface)."""

    private_dir = "/tmp"  # its own tmpfs, as it sees it

    def __init__(self, channel: Channel, status: socket.socket, log: ChildLog) -> None:
        self.channel = channel
        self.status = status
        self.log = log
        self.started = time.monotonic()
        self.pidfd: int | None = None
        self.pid = -1
        self.hello: dict = {}
        self.start_s: float | None = None
        self._returncode: int | None = None

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S, gate: Gate = let_go) -> dict:
        """``init`` (with the pidfd) -> ``go`` through ``gate`` -> ``ready``, as `Child.wait_ready`."""
        deadline = time.monotonic() + timeout_s
        try:
            msg = self.channel.recv(deadline, max_fds=1)
            if msg.op != Op.INIT or len(msg.fds) != 1:
                close_fds(msg.fds)
                raise InfrastructureError(f"forked candidate sent {msg.op!r} with {len(msg.fds)} descriptors "
                                          f"instead of init with its pidfd")
            self.pidfd, self.pid = msg.fds[0], pid_of(msg.fds[0])
            msg = gate(self, deadline)
        except (ChannelClosed, ChannelTimeout) as e:
            self.kill()
            raise InfrastructureError(f"forked candidate did not start: {e}\n{self.log_tail()}") from e
        if msg.op != Op.READY:
            self.kill()
            raise InfrastructureError(f"forked candidate sent {msg.op!r} instead of ready")
        self.hello = msg.header
        self.start_s = time.monotonic() - self.started
        return self.hello

    @property
    def returncode(self) -> int | None:
        """The candidate's exit status as A saw it (negative: killed by that signal), once known."""
        return self._read_status(0)

    def _read_status(self, timeout_s: float) -> int | None:
        """A's report of the exit status, waiting up to ``timeout_s`` for it."""
        if self._returncode is None and self.status.fileno() >= 0:
            if select.select([self.status], [], [], timeout_s)[0]:
                data = self.status.recv(4)
                self._returncode = struct.unpack(">i", data)[0] if len(data) == 4 else -signal.SIGKILL
        return self._returncode

    def alive(self) -> bool:
        return self.pidfd is not None and not select.select([self.pidfd], [], [], 0)[0]

    def wait(self, timeout_s: float) -> bool:
        if self.pidfd is None:
            return True
        return bool(select.select([self.pidfd], [], [], timeout_s)[0])

    def kill(self) -> None:
        """SIGKILL through the pidfd (the candidate is pid 1 of its namespace: everything it started
        goes with it), then wait until it has exited and A has reported."""
        if self.pidfd is not None:
            with contextlib.suppress(ProcessLookupError, OSError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            if not self.wait(10):
                log.warning("forked candidate %d did not exit after SIGKILL", self.pid)
        with contextlib.suppress(OSError, ValueError):
            self._read_status(10)
        self.channel.close()

    def discard(self) -> None:
        self.kill()
        if self.pidfd is not None:
            close_fds([self.pidfd])
            self.pidfd = None
        self.status.close()
        self.log.close()


def pid_of(pidfd: int) -> int:
    """The pid a pidfd refers to, in our pid namespace (``/proc/self/fdinfo``)."""
    with open(f"/proc/self/fdinfo/{pidfd}") as f:
        for line in f:
            if line.startswith("Pid:"):
                pid = int(line.split()[1])
                if pid > 0:
                    return pid
    raise InfrastructureError("the forked candidate's pidfd names no process")


class Zygote:
    """One zygote child per device; `fork` returns a `ForkedChild` (not yet ready)."""

    def __init__(self, device: str, env: dict[str, str], runner: Runner) -> None:
        if not runner.sandboxed:
            raise SandboxUnavailable("the zygote walls its forks off inside the sandbox; none here")
        self.device, self.env, self.runner = device, env, runner
        self._lock = threading.Lock()
        self.child = self._start()

    def _start(self) -> Child:
        child = Child("drkernel.gym.candidate.zygote", self.device, self.env, self.runner, CANDIDATE_LIMITS)
        abi = Ready.from_header(child.wait_ready()).landlock or 0
        if abi < LANDLOCK_MIN_ABI:
            child.discard()
            raise SandboxUnavailable(f"the kernel's Landlock ABI is {abi} (at least {LANDLOCK_MIN_ABI} walls the "
                                     f"zygote's forks off each other)")
        if self.device != "cpu":  # one trusted fork compiles the warm-up kernel for every later fork
            seeder = self._fork(child, seed=True)
            try:
                msg = seeder.channel.recv(time.monotonic() + START_TIMEOUT_S)
                if msg.op != Op.SEEDED:
                    raise InfrastructureError(f"the seed fork sent {msg.op!r}")
            except (ChannelClosed, ChannelTimeout) as e:
                raise InfrastructureError(f"the seed fork failed: {e}\n{seeder.log_tail()}") from e
            finally:
                seeder.channel.close()
                seeder.status.close()
                seeder.log.close()
            child.send(Signal(Op.SEED).to_header())
            child.recv(time.monotonic() + FORK_TIMEOUT_S)
        probe = self._fork(child)  # one whole fork, walls and all, before the pool relies on them:
        try:                       # a kernel that refuses a step fails here, and the runtime starts
            probe.wait_ready()     # fresh processes instead
        except InfrastructureError:
            child.discard()
            raise
        finally:
            probe.discard()
        return child

    def _fork(self, child: Child, seed: bool = False) -> ForkedChild:
        ours, theirs = channel_pair()
        status_ours, status_theirs = socket.socketpair()
        output = ChildLog()  # the fork's stdout and stderr: a pipe, its writing end sent along
        limits = CANDIDATE_LIMITS
        try:
            child.send(Fork(limits.tmp_bytes, limits.shm_bytes, seed).to_header(),
                       fds=[theirs, status_theirs.fileno(), output.writer])
            reply = child.recv(time.monotonic() + FORK_TIMEOUT_S)
        except BaseException:
            output.close()
            raise
        finally:
            close_fds([theirs])
            output.close_writer()
            status_theirs.close()
        if reply.op != Op.FORKED:
            close_fds([ours])
            status_ours.close()
            output.close()
            raise InfrastructureError(f"the zygote could not fork: {str(reply.header.get('message'))[:2000]}")
        return ForkedChild(Channel(ours), status_ours, output)

    def fork(self) -> ForkedChild:
        """A new candidate; a dead zygote is restarted once."""
        with self._lock:
            try:
                if self.child.alive():
                    return self._fork(self.child)
                reason = f"exit status {self.child.returncode}"
            except (ChannelClosed, ChannelTimeout) as e:
                reason = str(e)
            log.warning("the zygote on %s died (%s); restarting it", self.device, reason)
            self.child.discard()
            self.child = self._start()
            return self._fork(self.child)

    def close(self) -> None:
        with self._lock:
            with contextlib.suppress(ChannelClosed, OSError):
                self.child.send(Signal(Op.SHUTDOWN).to_header())
            self.child.discard()
