"""Candidates forked from the zygote (issue 14, `drkernel.gym.candidate.zygote`): each fork is walled
off from the zygote and from the other candidates by namespaces of its own inside the sandbox, and
a dead zygote is replaced. Real forks of the real zygote; the probe is solution code that reports
what it could reach (through its error message)."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest

import drkernel
from drkernel.gym import InProcessEvaluator, Status
from drkernel.gym.candidate.zygote import landlock_abi
from drkernel.gym.messages import LANDLOCK_MIN_ABI
from drkernel.gym.checks import core_checks
from gym_cases import RELU_SOLUTION, request

# What an attacker in one candidate would try against the zygote and its siblings: list /proc, read
# every other process's environment, memory and root (its /tmp), signal them, unmount its own /tmp
# to reach the zygote's, and the same again from a nested user + mount namespace.
PROBE = r'''
import ctypes, json, os
import torch.nn as nn


def reach(pid):
    out = {}
    for what in ("environ", "mem", "root/tmp", "fd/3"):
        path = f"/proc/{pid}/{what}"
        try:
            if what == "root/tmp":
                os.listdir(path)
            elif what == "fd/3":
                os.open(path, os.O_RDONLY)
            else:
                open(path, "rb").read(1)
            out[what] = 0
        except OSError as e:
            out[what] = e.errno
    try:
        os.kill(pid, 0)
        out["kill"] = 0
    except OSError as e:
        out["kill"] = e.errno
    return out


def facts():
    libc = ctypes.CDLL(None, use_errno=True)
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    f = {"pid": os.getpid(), "tmp": sorted(os.listdir("/tmp")),
         "status": {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "NoNewPrivs", "NSpid")}}
    open("/tmp/mark", "w").write("planted")
    os.makedirs("/tmp/cache/tmp.1")  # Triton's cache writes a temp dir, then renames into place
    open("/tmp/cache/tmp.1/k", "w").write("kernel")
    os.replace("/tmp/cache/tmp.1/k", "/tmp/cache/k")
    f["renamed"] = open("/tmp/cache/k").read()
    nspid = f["status"]["NSpid"].split()
    f["fresh_proc"] = len(nspid) == 1  # /proc of its own pid namespace: its pid there is all it shows
    me = int(nspid[-2]) if len(nspid) > 1 else os.getpid()
    f["others"] = {p: reach(int(p)) for p in os.listdir("/proc") if p.isdigit() and int(p) != me}
    f["addressable"] = []  # any pid but its own that a signal reaches (the zygote's, a sibling's, ...)
    for pid in range(2, 1 << 15):
        try:
            os.kill(pid, 0)
            f["addressable"].append(pid)
        except PermissionError:
            f["addressable"].append(pid)
        except ProcessLookupError:
            pass
    f["umount"] = libc.umount2(b"/tmp", 2)
    if libc.unshare(0x10000000) == 0 and libc.unshare(0x00020000) == 0:
        f["umount_nested"] = libc.umount2(b"/tmp", 2)
        f["tmp_nested"] = sorted(os.listdir("/tmp"))
    return f


class ModelNew(nn.Module):
    def forward(self, *args):
        raise RuntimeError("FACTS" + json.dumps(facts()) + "END")
'''


def bound_under_tmp() -> set[str]:
    """First components below /tmp of the paths the sandbox binds from there (this checkout's
    sources and virtualenv, when the checkout lives under /tmp)."""
    paths = [sys.prefix, str(Path(drkernel.__file__).resolve().parents[1]),
             *os.environ.get("PYTHONPATH", "").split(os.pathsep), *sys.path]
    return {Path(p).parts[2] for p in paths if p.startswith("/tmp/") and len(Path(p).parts) > 2}


def probe(ev: InProcessEvaluator) -> dict:
    r = ev.evaluate(request(PROBE))
    assert r.status is Status.RUNTIME_ERROR and "FACTS" in (r.error or ""), (r.status, r.error)
    start = r.error.index("FACTS{") + len("FACTS")  # the traceback also shows the raising line
    return json.loads(r.error[start:r.error.index("}END", start) + 1])


needs_landlock = pytest.mark.skipif(landlock_abi() < LANDLOCK_MIN_ABI,
                                    reason="this kernel has no Landlock ABI >= 2: the gym starts fresh candidates")


@pytest.fixture(scope="module")
def forking():
    # without the seccomp filter, which would kill the probe at its first ptrace-guarded read or
    # unshare: the namespaces, capabilities and Landlock alone (`tests/gym/test_seccomp.py`)
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=2, checks=core_checks(),
                            seccomp=False) as ev:
        assert ev.device_info()["zygote"] is True
        yield ev


@needs_landlock
def test_a_fork_is_pid_1_of_its_own_namespace_without_capabilities(forking):
    f = probe(forking)
    s = f["status"]
    assert f["pid"] == 1
    # a fresh /proc of its own pid namespace (with the zygote's, cuInit fails in the fork: 304); as
    # root, the boot unmounted bwrap's covers over /proc, which made the kernel refuse that mount
    assert f["fresh_proc"], s["NSpid"]
    assert int(s["CapEff"], 16) == int(s["CapPrm"], 16) == int(s["CapBnd"], 16) == 0
    assert s["NoNewPrivs"] == "1"
    # a fresh tmpfs: nothing of the zygote or of another candidate, only the read-only binds of a
    # checkout or virtualenv that lives under /tmp (re-attached above the new tmpfs)
    assert set(f["tmp"]) - {"solution"} <= bound_under_tmp(), f["tmp"]
    assert f["renamed"] == "kernel"  # Landlock's domain still lets files move between directories


@needs_landlock
def test_a_fork_reaches_neither_the_zygote_nor_a_warm_sibling(forking):
    first, second = probe(forking), probe(forking)
    assert "mark" not in second["tmp"]  # the first candidate's file went with its tmpfs
    for f in (first, second):
        assert f["addressable"] == [], f["addressable"]  # no pid outside its namespace can be signalled
        assert f["others"] == {}, f["others"]  # its /proc lists no process but itself
        assert f["umount"] != 0  # without capabilities its /tmp stays (nor can it uncover the zygote's /proc)
        if "umount_nested" in f:  # a nested user namespace gets capabilities, but the mount is locked
            assert f["umount_nested"] != 0 and "mark" in f["tmp_nested"]


@needs_landlock
def test_a_killed_zygote_is_replaced_and_evaluations_go_on(forking):
    rt = forking._runtime("cpu")
    rt.zygote.child.kill()  # takes its forks (the warm candidates) along
    for _ in range(2):
        r = forking.evaluate(request(RELU_SOLUTION))
        assert r.status is Status.CORRECT, r.error
    assert rt.zygote.child.alive()


def test_without_the_zygote_candidates_start_as_fresh_processes():
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=1, zygote=False) as ev:
        assert ev.device_info()["zygote"] is False
        r = ev.evaluate(request(RELU_SOLUTION))
    assert r.status is Status.CORRECT, r.error


@needs_landlock
def test_a_one_shot_candidate_starts_fresh_beside_the_judge_and_later_ones_fork():
    # pool_size 0 (`drkernel gym eval`): the first candidate is a fresh process started with the judge,
    # ready before the evaluation asks; the zygote only starts when a second candidate is wanted
    with InProcessEvaluator(device="cpu", concurrency=1, pool_size=0, checks=core_checks()) as ev:
        rt = ev._runtime("cpu")
        assert rt.zygote is None and rt.pool.ready_count == 1
        first = rt.pool._ready[0]
        assert type(first).__name__ == "Child"  # not a ForkedChild
        assert ev.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
        assert ev.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
        assert rt.zygote is not None and rt.zygote.child.alive()


def test_the_device_guess_matches_the_judge_without_torch(monkeypatch):
    from drkernel.devices import Device

    def guess_device(name):
        return Device.parse(name).guess()

    assert guess_device("cuda") == "cuda:0" and guess_device("cuda:3") == "cuda:3"
    assert guess_device("cpu") == "cpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert guess_device("auto") == "cpu"
    with InProcessEvaluator(device="auto", concurrency=1, pool_size=0, checks=core_checks()) as ev:
        # this machine has no GPU: the judge resolves auto to the CPU, as guessed
        assert ev.device_info()["device"] == guess_device("auto") == "cpu"
        assert ev._runtime("auto").pool.ready_count == 1
