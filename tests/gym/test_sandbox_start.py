"""What a candidate's start creates (`drkernel.gym.candidate.zygote.enter_namespaces`), and the benchmark
that prices it per namespace kind (``benchmarks/namespace_cost.py``): real forks, real namespaces."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from drkernel.gym.candidate import zygote

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import namespace_cost

KINDS = {"user": zygote.CLONE_NEWUSER, "mnt": zygote.CLONE_NEWNS, "pid": zygote.CLONE_NEWPID,
         "ipc": zygote.CLONE_NEWIPC, "net": zygote.CLONE_NEWNET, "uts": zygote.CLONE_NEWUTS}


def namespaces_after(flags: int) -> dict[str, str]:
    """The namespaces (``/proc/self/ns`` links) of a fork's child after the fork (A) entered
    ``enter_namespaces(flags)``: B, as the candidate is (a new pid namespace holds A's children only)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            zygote.enter_namespaces(flags)
            b = os.fork()
            if b == 0:
                os.write(w, json.dumps({k: os.readlink(f"/proc/self/ns/{k}") for k in KINDS}).encode())
                os._exit(0)
            _, status = os.waitpid(b, 0)
            code = os.waitstatus_to_exitcode(status)
        except BaseException:  # noqa: BLE001 - the parent sees no answer
            code = 70
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and text
    return json.loads(text)


@pytest.fixture(scope="module")
def ours() -> dict[str, str]:
    return {k: os.readlink(f"/proc/self/ns/{k}") for k in KINDS}


def test_a_fork_gets_every_namespace_kind_of_its_own(ours):
    theirs = namespaces_after(zygote.FORK_NAMESPACES)
    assert {k for k in KINDS if theirs[k] != ours[k]} == set(KINDS)


def test_a_measurement_variant_leaves_out_only_its_kind(ours):
    theirs = namespaces_after(namespace_cost.VARIANTS["no-net"])
    assert theirs["net"] == ours["net"]
    assert {k for k in KINDS if theirs[k] != ours[k]} == set(KINDS) - {"net"}


@pytest.mark.parametrize("variant", ["full", "no-net", "shared-net", "fork-only", "one-fork"])
def test_every_cycle_of_the_benchmark_comes_up_and_is_reaped(variant):
    # two lanes of two cycles: four A/B pairs, each up (B walled off) and reaped with exit status 0
    r = namespace_cost.run(variant, lanes=2, cycles=2)
    assert (r.cycles, r.failed) == (4, 0)
    assert r.start["n"] == 4 and r.teardown["n"] == 4
    assert 0.0 < r.start["median"] <= r.start["p95"] and r.teardown["median"] >= 0.0
