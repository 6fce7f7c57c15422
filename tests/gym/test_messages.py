"""The messages between the gym's processes (`drkernel.gym.messages`): every op round-trips through its
dataclass and JSON, malformed headers are `ProtocolViolation`s that say what is wrong, and a candidate
that writes a malformed message of its own ends as a crash through the real gym, never valid."""

from __future__ import annotations

import json

import pytest

from drkernel.gym import Status
from drkernel.gym.ipc import ProtocolViolation
from drkernel.gym.messages import (MESSAGES, NAME_CAP, TAG_CAP, TEXT_CAP, Compare, CompareRequest, Done, Error,
                                   Extra, Fork, Forked, Job, Op, Outputs, Prepare, Prepared, Ready, Release, Signal, SolutionPath,
                                   TimeReference, Timed, Timing, Verdict, op_of, parse, parse_candidate)
from gym_cases import request

TREE = {"k": "tuple", "items": [{"k": "tensor", "dtype": "float32", "shape": [2], "type": "Tensor", "offset": 0,
                                 "nbytes": 8}, {"k": "list", "items": []}]}
STATS = {"median_ms": 1.0, "iqr_ms": 0.1, "cv": 0.01, "mean_ms": 1.0, "min_ms": 0.9, "n": 20}

EXAMPLES = [
    Signal(Op.INIT), Signal(Op.GO), Signal(Op.LOCK), Signal(Op.LOCKED), Signal(Op.CONTINUE), Signal(Op.REMEASURE),
    Signal(Op.UNLOCK), Signal(Op.RETRY_HOST), Signal(Op.RELEASED), Signal(Op.SHUTDOWN),
    Signal(Op.SEED), Signal(Op.SEEDED), Fork(2 << 30, 512 << 20), Fork(1 << 20, 1 << 20, seed=True), Forked(12),
    Ready(17), Ready(3, "cuda:0", "NVIDIA H100", 80 << 30, {"torch": "2.5"}, {"tf32": False}), Ready(2, landlock=7),
    Job({"solution": "class ModelNew: ...", "trials": [{"seed": 1, "code": "x", "size": "primary"}]}),
    SolutionPath("/tmp/solution/solution_ab.py"),
    Outputs(0, TREE), Outputs(2, TREE, staging=4096),
    Compare("timing", "timed_call_3", TREE), Compare(1, "poisoned", TREE, staging=512),
    Verdict(True), Verdict(False, "3 of 9 values outside", 0.5, 0.25, 1e-2, 1e-2, ("input[0]",), seconds=0.01),
    Verdict(False, "the staging buffer could not be mapped", retry_host=True),
    Extra("integrity", {"runs": {"poisoned": True}}),
    Timing(Op.TIMING, STATS), Timing(Op.TIMING_SYNC, STATS),
    Error("forward", "RuntimeError", "boom", "Traceback ..."),
    Done({"inputs": 0.5}, {"integrity": {"hacks": []}}, {"tf32": False}),
    Prepare({"name": "relu"}, True, 1 << 16, False, 42),
    Prepared("code", None, 1024, None, 0.25, 0.5),
    Prepared("code", "code2", 1024, None, 0.25, 0.5, (0, 1, 4), perturb_across=True),
    TimeReference("code", 7, 7, {"warmup_calls": 3, "timed_calls": 20, "reference": "eager"}),
    Timed(STATS, 1.5),
    Release("job-1"),
]


def test_every_op_has_a_message_class_and_an_example():
    assert set(MESSAGES) == set(Op)
    assert {m.op for m in EXAMPLES} == set(Op)


@pytest.mark.parametrize("msg", EXAMPLES, ids=lambda m: f"{type(m).__name__}-{m.op.value}")
def test_round_trip_through_json(msg):
    header = json.loads(json.dumps(msg.to_header()))
    assert header["op"] == msg.op.value and op_of(header) is msg.op
    assert type(msg).from_header(header) == msg
    assert parse(header) == msg


def test_the_judges_compare_request_round_trips():
    req = CompareRequest("job-1", "timing", "code", 5, 6, "kernelgym", TREE, "timed_call_1", 4096)
    assert CompareRequest.from_header(json.loads(json.dumps(req.to_header()))) == req
    with pytest.raises(ProtocolViolation, match="'seed' is str"):
        CompareRequest.from_header({**req.to_header(), "seed": "5"})


def test_an_op_serialises_as_its_bare_string():
    assert json.dumps({"op": Op.DONE}) == '{"op": "done"}' and Op.DONE == "done"


@pytest.mark.parametrize("header, match", [
    ({"op": "bogus"}, "unknown message 'bogus'"),
    ({"op": 5}, "unknown message '5'"),
    ({}, "unknown message 'None'"),
    ({"op": ["done"]}, "unknown message"),
    (["op", "done"], "a header that is list"),
    ({"op": "outputs", "tree": TREE}, "outputs message without 'trial'"),
    ({"op": "outputs", "trial": "0", "tree": TREE}, "'trial' is str, not int"),
    ({"op": "outputs", "trial": True, "tree": TREE}, "'trial' is bool"),
    ({"op": "outputs", "trial": -1, "tree": TREE}, "trial -1"),
    ({"op": "outputs", "trial": "timing", "tree": TREE}, "'trial' is str, not int"),
    ({"op": "compare", "trial": "0", "tag": "poisoned", "tree": TREE}, "trial '0' \\(an index, or 'timing'\\)"),
    ({"op": "outputs", "trial": 0, "tree": [1]}, "'tree' is list, not dict"),
    ({"op": "outputs", "trial": 0, "tree": TREE, "staging": 0}, "staging buffer of 0 bytes"),
    ({"op": "compare", "trial": 0, "tag": "t" * (TAG_CAP + 1), "tree": TREE}, f"'tag' of {TAG_CAP + 1} characters"),
    ({"op": "compare", "trial": 0, "tag": "", "tree": TREE}, "empty tag"),
    ({"op": "compare", "trial": 0, "tag": ["poisoned"], "tree": TREE}, "'tag' is list"),
    ({"op": "extra", "hook": "h" * (NAME_CAP + 1)}, "'hook' of"),
    ({"op": "extra"}, "extra message without 'hook'"),
    ({"op": "solution_path", "path": None}, "'path' is null, not str"),
    ({"op": "timing", "stats": [1.0]}, "'stats' is list"),
    ({"op": "error", "stage": "forward", "type": 5, "message": "m"}, "'type' is int"),
    ({"op": "error", "stage": "forward", "type": "E"}, "error message without 'message'"),
    ({"op": "done", "stages": {"x": "1"}, "reports": {}}, "a stage's seconds are not a number"),
    ({"op": "done", "stages": {}, "reports": "forged"}, "'reports' is str"),
    ({"op": "verdict", "passed": 1}, "'passed' is int, not bool"),
    ({"op": "verdict", "passed": True, "inputs_changed": [0]}, "inputs_changed is not a list of names"),
    ({"op": "ready"}, "ready message without 'pid'"),
])
def test_malformed_headers_are_violations_that_say_why(header, match):
    with pytest.raises(ProtocolViolation, match=match):
        parse(header)


@pytest.mark.parametrize("op", ["job", "verdict", "locked", "continue", "ready", "init", "prepare", "shutdown"])
def test_a_candidate_may_send_only_its_own_ops(op):
    with pytest.raises(ProtocolViolation, match=f"unknown message {op!r}"):
        parse_candidate({"op": op})


def test_a_class_refuses_another_ops_header():
    with pytest.raises(ProtocolViolation, match="a done message where outputs was expected"):
        Outputs.from_header({"op": "done", "stages": {}, "reports": {}})


def test_free_text_is_cut_identifiers_are_not():
    long = "x" * (TEXT_CAP + 5)
    e = Error.from_header({"op": "error", "stage": "forward", "type": "E", "message": long, "traceback": long})
    assert len(e.message) == TEXT_CAP and len(e.traceback) == TEXT_CAP
    with pytest.raises(ProtocolViolation, match="'stage' of"):
        Error.from_header({"op": "error", "stage": long, "type": "E", "message": "m"})


def test_claimed_timing_stats_are_kept_only_as_finite_numbers():
    assert Timing(Op.TIMING, STATS).claimed()["median_ms"] == 1.0
    for bad in ({**STATS, "median_ms": -1.0}, {**STATS, "cv": float("inf")}, {**STATS, "n": "many"},
                {k: v for k, v in STATS.items() if k != "min_ms"}):
        assert Timing(Op.TIMING, bad).claimed() is None


# Solution code that finds the channel during its import (after the harness sent ``solution_path``) and
# writes one malformed message; the harness's own messages never come.
MALFORMED = '''
import json, os
import torch.nn as nn
from drkernel.gym.ipc import Channel

for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
            Channel(fd).send(json.loads(HEADER))
            break
    except OSError:
        continue
os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
'''


@pytest.mark.parametrize("header, expect", [
    ({"op": "outputs", "trial": "0", "tree": {"k": "scalar", "value": 1}}, "'trial' is str, not int"),
    ({"op": "error", "stage": "forward", "type": 7, "message": "m"}, "'type' is int"),
    ({"op": "verdict", "passed": True}, "unknown message 'verdict'"),
    ({"op": "compare", "trial": 0, "tag": "t" * 5000, "tree": {"k": "scalar", "value": 1}}, "'tag' of 5000"),
])
def test_a_malformed_candidate_message_is_a_crash(boundary_only_evaluator, header, expect):
    r = boundary_only_evaluator.evaluate(request(f"HEADER = {json.dumps(json.dumps(header))}\n" + MALFORMED))
    assert not r.valid and not r.valid_lenient
    assert r.status is Status.CRASHED, (r.status, r.error)
    assert "broke the harness protocol" in r.error and expect in r.error, r.error
