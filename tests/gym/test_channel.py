"""The channel between candidate and orchestrator: solution code that finds it and writes its own
messages (the forged-report attack of issue 12) does not come out valid, and the orchestrator's
`ProtocolOrder` refuses messages out of the protocol's order."""

from __future__ import annotations

import pytest

from drkernel.gym import Status
from drkernel.gym.ipc import ProtocolViolation
from drkernel.gym.messages import Op
from drkernel.gym.orchestrator.session import Phase, ProtocolOrder, forged_claims
from gym_cases import request

# No Triton at all: find the channel's socket among our descriptors, the job in the harness's frames, compute
# the answers with PyTorch, and speak the protocol ourselves, down to a `done` whose report claims
# own kernel launches; then exit before the harness can say anything.
FORGER = '''
import os, sys
import torch
import torch.nn as nn
from drkernel.gym.harness import inputs as harness
from drkernel.gym.ipc import Channel, encode_tree


def find_channel():
    for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                return Channel(fd)
        except OSError:
            continue
    raise RuntimeError("no socket among our descriptors")


def find_job():
    f = sys._getframe()
    while f is not None:
        job = f.f_locals.get("job")
        if isinstance(job, dict) and "trials" in job:
            return job
        f = f.f_back
    raise RuntimeError("no job in the stack")


ch, job = find_channel(), find_job()


def answer(spec):
    args = harness.draw_inputs(harness.load_reference(spec["code"]), spec["seed"], torch.device("cpu"))
    return (torch.relu(args[0]), list(args))


def send(header, value):
    tree, blob = encode_tree(value)
    ch.send({**header, "tree": tree}, blob)
    return ch.recv().header


REPORT = {"launches": {"kernels": [{"name": "relu_kernel", "own": True, "launches": 64, "total_launches": 64}]},
          "integrity": {"hacks": [], "own_launches": 64, "coverage_own_launches": 1,
                        "call_count_launches": [1] * 40}}
if MODE == "early_done":
    ch.send({"op": "done", "stages": {}, "reports": REPORT})
elif MODE == "descriptors":  # hand the orchestrator descriptors of its own choosing with a trial
    tree, blob = encode_tree(answer(job["trials"][0]))
    ch.send({"op": "outputs", "trial": 0, "tree": tree}, blob, fds=[0, 2])
    ch.recv()
else:
    for i, spec in enumerate(job["trials"]):
        assert send({"op": "outputs", "trial": i}, answer(spec))["passed"]
    n = int(job["config"]["trials"])
    first, last = answer(job["trials"][0]), answer(job["trials"][n - 1])
    zeros = (torch.zeros_like(first[0]), first[1])
    for tag, trial, value in (("skip_own", 0, zeros), ("zeros_probe", 0, zeros), ("poisoned", n - 1, last),
                              ("recall_same", 1, answer(job["trials"][1])), ("call_count_last", n - 1, last)):
        send({"op": "compare", "trial": trial, "tag": tag}, value)
    for hook in job["hooks"]:
        ch.send({"op": "extra", "hook": str(hook).rsplit(":", 1)[-1].lower(), "result": {"runs": {}}})
    ch.send({"op": "done", "stages": {}, "reports": REPORT})
os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


@pytest.mark.parametrize("mode, expect", [("full", "forged report"), ("early_done", "done out of order"),
                                          ("descriptors", "2 descriptors")])
def test_a_solution_speaking_the_protocol_itself_is_not_valid(boundary_only_evaluator, mode, expect):
    r = boundary_only_evaluator.evaluate(request(f"MODE = {mode!r}\n" + FORGER))
    assert not r.valid and not r.valid_lenient
    assert r.status is Status.CRASHED and expect in r.error, (r.status, r.error)


def test_the_default_checks_still_end_the_forger_without_triton(evaluator):
    r = evaluator.evaluate(request("MODE = 'full'\n" + FORGER))
    assert not r.valid and r.status is not Status.CORRECT


def order(trials=2, hooks=1, timing=False) -> ProtocolOrder:
    o = ProtocolOrder(trials, hooks, timing)
    o.check(Op.SOLUTION_PATH)
    return o


def test_trials_must_come_in_order_and_once():
    o = order()
    with pytest.raises(ProtocolViolation, match="trial 1 when trial 0 was due"):
        o.check(Op.OUTPUTS, 1)
    o.check(Op.OUTPUTS, 0)
    o.judged(None, True)
    with pytest.raises(ProtocolViolation, match="trial 0 when trial 1 was due"):
        o.check(Op.OUTPUTS, 0)  # a replay of a passed trial


def test_each_tag_is_judged_once_and_only_after_the_trials():
    o = order(trials=1)
    with pytest.raises(ProtocolViolation, match="compare"):
        o.check(Op.COMPARE, 0)  # before the trials finished
    o.check(Op.OUTPUTS, 0)
    o.judged(None, True)
    o.check(Op.COMPARE, 0)
    o.judged("poisoned", False)
    o.check(Op.COMPARE, 0)
    with pytest.raises(ProtocolViolation, match="second comparison for 'poisoned'"):
        o.judged("poisoned", True)  # a passing re-run cannot replace the failed one


def test_done_only_at_the_end():
    o = order(trials=1, hooks=1, timing=True)
    with pytest.raises(ProtocolViolation, match="done out of order"):
        o.check(Op.DONE)
    o.check(Op.OUTPUTS, 0)
    o.judged(None, True)
    o.check(Op.EXTRA)
    with pytest.raises(ProtocolViolation, match="done out of order"):
        o.check(Op.DONE)  # the timed region is due on the GPU
    with pytest.raises(ProtocolViolation, match="compare of trial 'timing'"):
        o.check(Op.COMPARE, "timing")
    o.check(Op.LOCK)
    o.timed_region_over()
    o.check(Op.COMPARE, "timing")
    o.check(Op.DONE)


def test_after_an_error_or_a_failed_trial_only_done():
    o = order()
    o.check(Op.OUTPUTS, 0)
    o.judged(None, False)
    assert o.phase is Phase.ENDED
    with pytest.raises(ProtocolViolation, match="after the run ended"):
        o.check(Op.EXTRA)
    o.check(Op.DONE)
    o = order()
    o.check(Op.ERROR)
    with pytest.raises(ProtocolViolation, match="after the run ended"):
        o.check(Op.OUTPUTS, 0)


def test_unknown_messages_are_violations():
    with pytest.raises(ProtocolViolation, match="unknown message 'verdict'"):
        order().check(Op.VERDICT)


def test_forged_claims_against_the_source():
    claim = {"reports": {"launches": {"kernels": [{"name": "relu_kernel", "own": True}]}}}
    assert "no triton.jit" in forged_claims("import torch\n", claim)
    assert "does not define" in forged_claims("import triton\n@triton.jit\ndef other(x): pass\n", claim)
    assert forged_claims("import triton\n@triton.jit\ndef relu_kernel(x): pass\n", claim) is None
    # the call form and a kernel defined inside a function are the source's own too
    nested = "import triton\ndef make():\n    def relu_kernel(x): pass\n    return triton.jit(relu_kernel)\n"
    claim = {"reports": {"launches": {"kernels": [{"name": "make.<locals>.relu_kernel", "own": True}]}}}
    assert forged_claims(nested, claim) is None
    assert forged_claims("", {"reports": {"launches": {"kernels": [{"name": "k", "own": False}]}}}) is None
    assert forged_claims("", {"reports": "junk"}) is None


def test_an_export_never_runs_the_outputs_own_code():
    """What the harness reads of an output is the tensor's: an instance ``detach`` (which could compute
    the answer at export) is never called, and a tuple subclass (whose ``__iter__`` could) is refused."""
    import torch

    from drkernel.gym.ipc import encode_tree

    called = []
    x = torch.arange(6.0)
    x.detach = lambda: called.append("detach") or torch.zeros(6)
    tree, blob = encode_tree(x)
    assert called == [] and tree["shape"] == [6] and len(blob) == 24
    assert torch.equal(torch.frombuffer(bytearray(blob), dtype=torch.float32), torch.arange(6.0))

    class Pair(tuple):
        def __iter__(self):
            called.append("iter")
            return iter((torch.ones(1),))

    with pytest.raises(TypeError, match="cannot export an output"):
        encode_tree(Pair((x,)))
    assert called == []


# The candidate's channel holds what a candidate's message can: a header past `CANDIDATE_HEADER` (60 MiB
# of JSON, 1.5 GiB once parsed) is refused from its 4-byte length, before a byte of it is read.
HUGE_HEADER = '''
import os, struct
import torch
import torch.nn as nn

SIZE = 60 << 20
for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        link = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:  # the listing's own descriptor
        continue
    if link.startswith("socket:"):
        body = b"[" + b"{}," * (SIZE // 3 - 1) + b"{}]"
        os.write(fd, struct.pack(">I", len(body)))
        view = memoryview(body)
        while view:  # blocks once the socket is full, until the orchestrator kills us
            view = view[os.write(fd, view[:1 << 20]):]
        break


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.relu(x)
'''


def test_a_candidate_writing_a_huge_header_by_hand_is_its_own_crash(boundary_only_evaluator):
    from drkernel.gym.ipc import CANDIDATE_HEADER

    r = boundary_only_evaluator.evaluate(request(HUGE_HEADER))
    assert r.status is Status.CRASHED and not r.valid, (r.status, r.error)
    sent = len(b"[" + b"{}," * ((60 << 20) // 3 - 1) + b"{}]")  # the solution's header, as it announced it
    assert f"a message header of {sent} bytes (at most {CANDIDATE_HEADER} here)" in r.error


def test_a_header_past_the_cap_is_refused_from_its_length_and_a_deep_one_from_the_parser():
    """The refusal needs only the length: the peer below never sends the header it announces."""
    import socket
    import struct

    from drkernel.gym.ipc import Channel

    ours, theirs = socket.socketpair()
    channel = Channel(ours.detach())
    try:
        theirs.sendall(struct.pack(">I", 1 << 20))
        with pytest.raises(ProtocolViolation, match="header of 1048576 bytes"):
            channel.recv(max_header=1 << 16)
    finally:
        channel.close()
        theirs.close()
    ours, theirs = socket.socketpair()
    channel = Channel(ours.detach())
    try:
        deep = b"[" * 10_000 + b"]" * 10_000
        theirs.sendall(struct.pack(">I", len(deep)) + deep + struct.pack(">Q", 0))
        with pytest.raises(ProtocolViolation, match="recursion"):
            channel.recv()
    finally:
        channel.close()
        theirs.close()


def test_the_encoder_refuses_a_tree_described_past_its_byte_bound():
    """What keeps an honest candidate's message under the cap: a tree's description over
    `MAX_TREE_BYTES` is the solution's output error where it is encoded (nodes within their bound)."""
    import torch

    from drkernel.gym.ipc import MAX_TREE_BYTES, MAX_TREE_NODES, encode_tree

    many = [torch.zeros([1] * 8) for _ in range(MAX_TREE_NODES // 2)]  # about 2.9 MB of descriptions
    with pytest.raises(TypeError, match=f"at most {MAX_TREE_BYTES}"):
        encode_tree(many)
    tree, _ = encode_tree(many[:1000])
    assert len(tree["items"]) == 1000


def test_a_request_reference_writing_a_huge_header_fails_as_the_reference(evaluator):
    """A request's reference runs in a judge of its own, so it can write on that judge's channel too:
    a header past `REFERENCE_HEADER` is refused from its length, as the reference's failure."""
    from drkernel.errors import JudgeError
    from drkernel.gym.ipc import REFERENCE_HEADER
    from drkernel.gym.orchestrator.own_judge import mark_request_reference
    from drkernel.problems.problem import Problem
    from gym_cases import RELU_REFERENCE, RELU_SOLUTION

    writes = HUGE_HEADER.split("\n\nclass ModelNew")[0].replace("import torch.nn as nn\n", "")
    problem = Problem(name="relu_loud", level=1, code=RELU_REFERENCE + writes, problem_id="relu_loud",
                      source="request", metadata=mark_request_reference({}))
    with pytest.raises(JudgeError, match=f"broke the judge's protocol.*at most {REFERENCE_HEADER} here"):
        evaluator.evaluate(request(RELU_SOLUTION, problem=problem))


def test_an_encoded_export_holds_nothing_of_its_tensors_once_sent():
    """`encode_tree` leaves no reference cycle behind: with the cyclic collector off, an exported
    output's and input's memory is freed as soon as the caller drops them (at full size each is
    gigabytes, and a cycle kept every trial's until the collector happened to run). The memory is
    watched through the numpy arrays the tensors are made from: a storage keeps its array alive."""
    import gc
    import weakref

    import numpy as np
    import torch

    from drkernel.gym.ipc import encode_tree

    was = gc.isenabled()
    gc.disable()
    try:
        arrays = [np.ones((8, 8), dtype=np.float32), np.ones((8, 8), dtype=np.float32)]
        watched = [weakref.ref(a) for a in arrays]
        out, arg = (torch.from_numpy(a) for a in arrays)
        del arrays
        tree, blob = encode_tree((out, [arg]))
        assert tree["k"] == "tuple" and len(blob) == 2 * 8 * 8 * 4
        del out, arg
        assert [w() for w in watched] == [None, None]
    finally:
        if was:
            gc.enable()
