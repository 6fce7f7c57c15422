"""Forks that share the zygote's network namespace (``DRKERNEL_FORK_SHARED_NET=1``, off by default) reach
no socket outside their own Landlock domain: not the host's or the zygote's abstract Unix sockets, not a
sibling's, not TCP on the loopback. The walls are the zygote's own code (`enter_namespaces`, `wall_off`)
on real forks; each refusal has a control in which the same attempt succeeds, so the tests can fail.
The last test runs the real zygote in the real sandbox with the setting on."""

from __future__ import annotations

import errno
import json
import os
import socket
from collections.abc import Callable

import pytest
from gym_cases import RELU_SOLUTION, request

from drkernel.gym import InProcessEvaluator, Status
from drkernel.gym.candidate import zygote
from drkernel.gym.checks import core_checks

pytestmark = pytest.mark.skipif(zygote.landlock_abi() < zygote.SHARED_NET_MIN_ABI,
                                reason="Landlock below ABI 6: forks never share the network namespace")
MB = 1 << 20


def walled(scoped: bool, body: Callable[[], dict], keep: tuple[int, ...] = ()) -> tuple[int, int]:
    """Fork A (the zygote's namespaces but the network one) and B (walled off, its Landlock domain
    scoped or not), B runs ``body`` and writes its JSON on a pipe. Returns (A's pid, the pipe's read end)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(r)
            zygote.enter_namespaces(zygote.SHARED_NET_NAMESPACES)
            b = os.fork()
            if b == 0:
                try:
                    zygote.wall_off(64 * MB, 64 * MB, shared_net=scoped)
                    os.write(w, json.dumps(body()).encode())
                finally:
                    os._exit(0)
            _, status = os.waitpid(b, 0)
            code = os.waitstatus_to_exitcode(status)
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def answer(pid: int, r: int) -> dict:
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and text, text
    return json.loads(text)


def in_walls(scoped: bool, body: Callable[[], dict]) -> dict:
    return answer(*walled(scoped, body))


def errno_of(call: Callable[[], object]) -> int:
    try:
        call()
        return 0
    except OSError as e:
        return e.errno


def connect(kind: int, address) -> Callable[[], None]:
    family = socket.AF_INET if isinstance(address, tuple) else socket.AF_UNIX

    def go() -> None:
        with socket.socket(family, kind) as s:
            if kind == socket.SOCK_DGRAM:
                s.sendto(b"x", address)
            else:
                s.connect(address)
    return go


@pytest.fixture
def outside():
    """An abstract stream listener, an abstract datagram socket and a TCP listener on the loopback,
    made outside any Landlock domain (as the host or the zygote would)."""
    tag = f"drkernel-test-{os.getpid()}"
    stream, dgram = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    stream.bind(f"\0{tag}-stream")
    stream.listen(8)
    dgram.bind(f"\0{tag}-dgram")
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(8)
    yield {"stream": f"\0{tag}-stream", "dgram": f"\0{tag}-dgram", "tcp": tcp.getsockname()}
    for s in (stream, dgram, tcp):
        s.close()


def attempts(where: dict) -> Callable[[], dict]:
    def body() -> dict:
        return {"net": os.readlink("/proc/self/ns/net"),
                "stream": errno_of(connect(socket.SOCK_STREAM, where["stream"])),
                "dgram": errno_of(connect(socket.SOCK_DGRAM, where["dgram"])),
                "tcp": errno_of(connect(socket.SOCK_STREAM, tuple(where["tcp"])))}
    return body


def test_a_scoped_fork_in_the_shared_namespace_reaches_no_socket_outside_its_domain(outside):
    got = in_walls(True, attempts(outside))
    assert got["net"] == os.readlink("/proc/self/ns/net")  # it does share our network namespace
    # Landlock: EPERM for an abstract socket bound outside the domain, EACCES for a TCP connect
    assert (got["stream"], got["dgram"], got["tcp"]) == (errno.EPERM, errno.EPERM, errno.EACCES), got


def test_without_the_scope_the_same_fork_reaches_them_all(outside):
    # the control: the names and the port are there to be reached; only the scope keeps them out
    got = in_walls(False, attempts(outside))
    assert (got["stream"], got["dgram"], got["tcp"]) == (0, 0, 0), got


def test_a_scoped_sibling_cannot_reach_another_forks_abstract_socket():
    name = f"\0drkernel-test-sibling-{os.getpid()}"
    bound_r, bound_w = os.pipe()
    done_r, done_w = os.pipe()

    def listener() -> dict:  # the first fork: binds, says so, waits until told, reports what came in
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(name)
            s.listen(8)
            os.write(bound_w, b"1")
            os.read(done_r, 1)
            s.setblocking(False)
            return {"accepted": errno_of(s.accept) == 0}

    pid, r = walled(True, listener)
    assert os.read(bound_r, 1) == b"1"
    sibling = in_walls(True, lambda: {"connect": errno_of(connect(socket.SOCK_STREAM, name))})
    from_outside = errno_of(connect(socket.SOCK_STREAM, name))  # the name is there, in the shared namespace
    os.write(done_w, b"1")
    first = answer(pid, r)
    for fd in (bound_r, bound_w, done_r, done_w):
        os.close(fd)
    assert sibling["connect"] == errno.EPERM, sibling
    assert from_outside == 0
    assert first["accepted"] is True  # ours came in: the sibling's never did (refused at its connect)


PROBE = r'''
import json, os, socket
import torch.nn as nn


def tcp():
    try:
        socket.create_connection(("127.0.0.1", 9), timeout=5).close()
        return 0
    except OSError as e:
        return e.errno


class ModelNew(nn.Module):
    def forward(self, *args):
        raise RuntimeError("FACTS" + json.dumps({"net": os.readlink("/proc/self/ns/net"), "tcp": tcp()}) + "END")
'''


def probe(ev: InProcessEvaluator) -> dict:
    r = ev.evaluate(request(PROBE))
    assert r.status is Status.RUNTIME_ERROR and "FACTS" in (r.error or ""), (r.status, r.error)
    start = r.error.index("FACTS{") + len("FACTS")
    return json.loads(r.error[start:r.error.index("}END", start) + 1])


def test_the_real_zygotes_forks_share_its_namespace_walled_by_landlock(monkeypatch):
    # seccomp off so the probe's TCP connect reaches Landlock (with it on, the socket call kills the
    # candidate first: tests/gym/test_seccomp.py); the zygote reads the setting from its environment
    monkeypatch.setenv(zygote.SHARED_NET_ENV, "1")
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, checks=core_checks(), seccomp=False) as ev:
        assert ev.device_info()["zygote"] is True
        first, second = probe(ev), probe(ev)
        assert ev.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
    assert first["net"] == second["net"]  # one namespace for both forks: the zygote's
    assert first["tcp"] == second["tcp"] == errno.EACCES  # Landlock's TCP rule (own namespace: ECONNREFUSED)
