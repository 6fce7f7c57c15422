"""Unit tests of the pure parts: comparison, classification, error tails, the wire format,
timing statistics, the reader-writer lock and the reference-timing cache."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from drkernel.gym.verdict.classify import classify_error, classify_exit, trim_tail
from drkernel.gym.judge.compare import compare_outputs, inputs_changed
from drkernel.gym.config import EvalConfig
from drkernel.gym.ipc import (Channel, ChannelClosed, ChannelTimeout, ProtocolViolation, channel_pair, close_fds,
                              decode_tree, encode_tree)
from drkernel.gym.orchestrator.refcache import ReferenceTimingCache, reference_key
from drkernel.gym.result import Status
from drkernel.gym.orchestrator.runtime import RWLock
from drkernel.gym.harness.timing import summarize


def test_compare_within_tolerance_and_errors_worked_by_hand():
    ref = torch.tensor([1.0, 2.0, -4.0])
    out = torch.tensor([1.005, 2.0, -4.04])
    # |diff| = [0.005, 0, 0.04]; allowed = 0.01 + 0.01 * |ref| = [0.02, 0.03, 0.05] -> all pass
    c = compare_outputs(out, ref, "kernelgym")
    assert c.passed and c.max_abs_err == pytest.approx(0.04, rel=1e-3) and c.max_rel_err == pytest.approx(0.01, rel=1e-2)
    # kernelbench: allowed = 1e-4 + 1e-4 * |ref| -> the first and last fail
    c = compare_outputs(out, ref, "kernelbench")
    assert not c.passed and "2 of 3 values" in c.message and "flat index 0" in c.message


def test_compare_structure_dtype_nan_inf_scalars():
    t = torch.ones(2)
    assert not compare_outputs((t, t), t, "kernelgym").passed
    assert "expected 2" in compare_outputs([t], [t, t], "kernelgym").message
    assert "dtype float16" in compare_outputs(t.half(), t, "kernelgym").message
    nan = torch.tensor([1.0, float("nan")])
    assert compare_outputs(nan.clone(), nan, "kernelgym").passed  # NaN where the reference has NaN
    assert "NaN" in compare_outputs(nan, torch.ones(2), "kernelgym").message
    inf = torch.tensor([float("inf"), 1.0])
    assert compare_outputs(inf.clone(), inf, "kernelgym").passed
    assert not compare_outputs(-inf, inf, "kernelgym").passed
    assert compare_outputs((t, 3.0), (t, 3.001), "kernelgym").passed
    assert not compare_outputs((t, 3.5), (t, 3.0), "kernelgym").passed
    assert compare_outputs(torch.tensor([3]), torch.tensor([3]), "kernelgym").passed
    assert not compare_outputs(torch.tensor([3]), torch.tensor([4]), "kernelgym").passed


def test_inputs_changed():
    a, b = torch.ones(3), torch.ones(3)
    assert inputs_changed([a, 5], [b, 5]) == []
    b[1] = 0
    assert inputs_changed([a, 5], [b, 5]) == ["input[0]"]


def test_trim_tail_drops_harness_frames_and_keeps_the_solutions():
    tb = ('Traceback (most recent call last):\n'
          '  File "/x/src/drkernel/gym/candidate/main.py", line 200, in trials\n'
          '    out = model(*args)\n'
          '          ^^^^^^^^^^^^\n'
          '  File "/tmp/drkernel-solution-1/solution_ab.py", line 7, in forward\n'
          '    return x @ x\n'
          'RuntimeError: mat1 and mat2 shapes cannot be multiplied\n')
    out = trim_tail(tb, "/tmp/drkernel-solution-1/solution_ab.py")
    assert out == ('Traceback (most recent call last):\n  File "solution.py", line 7, in forward\n'
                   '    return x @ x\nRuntimeError: mat1 and mat2 shapes cannot be multiplied')
    long = "\n".join(f"line {i}" for i in range(100))
    assert trim_tail(long).splitlines()[0] == "line 70"
    assert len(trim_tail("x" * 5000)) == 2000


@pytest.mark.parametrize("stage, exc, msg, cpu, expect", [
    ("import", "SyntaxError", "bad", False, Status.SYNTAX_ERROR),
    ("import", "ModuleNotFoundError", "no module", False, Status.IMPORT_ERROR),
    ("forward", "RuntimeError", "CUDA error: an illegal memory access was encountered", False, Status.CRASHED),
    ("forward", "OutOfMemoryError", "CUDA out of memory", False, Status.OUT_OF_MEMORY),
    ("forward", "CompilationError", "at 3:4: bad", False, Status.COMPILE_ERROR),
    ("forward", "RuntimeError", "boom", False, Status.RUNTIME_ERROR),
    ("forward", "NotImplementedError", "inline_asm not supported in interpreter mode", True, Status.UNSUPPORTED_ON_CPU),
    ("forward", "NotImplementedError", "inline_asm not supported in interpreter mode", False, Status.RUNTIME_ERROR),
    ("forward", "AttributeError", "'dtype' object has no attribute 'value'", True, Status.UNSUPPORTED_ON_CPU),
    ("signature", "TypeError", "too many", False, Status.SIGNATURE_MISMATCH),
    ("output", "TypeError", "dict", False, Status.INCORRECT),
])
def test_classify_error(stage, exc, msg, cpu, expect):
    assert classify_error(stage, exc, msg, "", cpu_mode=cpu) is expect


def test_classify_exit():
    assert classify_exit(-11, "")[0] is Status.CRASHED and "SIGSEGV" in classify_exit(-11, "")[1]
    assert classify_exit(-9, "torch.OutOfMemoryError: CUDA out of memory")[0] is Status.OUT_OF_MEMORY


def test_tree_roundtrip_through_host_bytes():
    value = (torch.arange(6.0).reshape(2, 3).t(), [torch.tensor([1, 2], dtype=torch.int64), 2.5, None],
             torch.ones(2, dtype=torch.bfloat16))
    tree, blob = encode_tree(value)
    back = decode_tree(tree, blob, torch.device("cpu"))
    assert isinstance(back, tuple) and torch.equal(back[0], value[0]) and back[1][1:] == [2.5, None]
    assert torch.equal(back[1][0], value[1][0]) and back[2].dtype == torch.bfloat16
    with pytest.raises(TypeError):
        encode_tree({"a": 1})


def test_tree_rejects_forged_headers():
    tree, blob = encode_tree(torch.ones(4))
    with pytest.raises(ProtocolViolation):
        decode_tree({**tree, "nbytes": 4096}, blob, torch.device("cpu"))
    with pytest.raises(ProtocolViolation):
        decode_tree({**tree, "dtype": "__class__"}, blob, torch.device("cpu"))
    with pytest.raises(ProtocolViolation):
        decode_tree({"k": "pickle"}, blob, torch.device("cpu"))


def test_channel_frames_and_deadline():
    r1, w1 = os.pipe()
    ch = Channel(r1, w1)
    ch.send({"op": "x", "n": 1}, b"\x00" * 30000)
    msg = ch.recv(time.monotonic() + 5)
    assert msg.header == {"op": "x", "n": 1} and len(msg.blob) == 30000
    with pytest.raises(ChannelTimeout):
        ch.recv(time.monotonic() + 0.05)
    os.write(w1, b"\x00\x00\x00\x02{]" + b"\x00" * 8)
    with pytest.raises(ProtocolViolation):
        ch.recv(time.monotonic() + 5)
    ch.close()


def test_channel_over_a_socket_carries_descriptors_and_refuses_unasked_ones():
    ours, theirs = channel_pair()
    a, b = Channel(ours), Channel(theirs)
    r, w = os.pipe()
    try:
        a.send({"op": "outputs"}, b"\x01" * 70000, fds=[r])
        msg = b.recv(time.monotonic() + 5, max_fds=1)
        assert msg.header == {"op": "outputs"} and len(msg.blob) == 70000 and len(msg.fds) == 1
        os.write(w, b"y")  # the descriptor that arrived is the same pipe, under a number of its own
        assert os.read(msg.fds[0], 1) == b"y" and msg.fds[0] != r
        close_fds(msg.fds)
        before = len(os.listdir("/proc/self/fd"))
        a.send({"op": "done"}, fds=[r, w])  # nobody asked for descriptors with this message
        with pytest.raises(ProtocolViolation, match="2 descriptors"):
            b.recv(time.monotonic() + 5)
        assert len(os.listdir("/proc/self/fd")) == before  # the ones that came were closed
        a.send({"op": "next"})
        assert b.recv(time.monotonic() + 5).header == {"op": "next"}  # the stream stays in step
        piped = Channel(*os.pipe())
        with pytest.raises(ProtocolViolation):
            piped.send({"op": "x"}, fds=[r])  # pipes cannot carry descriptors
        piped.close()
    finally:
        a.close()
        b.close()
        close_fds([r, w])


def test_summarize_worked_by_hand():
    s = summarize([1.0, 2.0, 3.0, 4.0], wall_ms_per_call=5.0)
    # median 2.5; inclusive quartiles 1.75 and 3.25 -> IQR 1.5; mean 2.5; pstdev sqrt(1.25)
    assert s["median_ms"] == 2.5 and s["iqr_ms"] == pytest.approx(1.5) and s["mean_ms"] == 2.5
    assert s["cv"] == pytest.approx(1.25 ** 0.5 / 2.5) and s["min_ms"] == 1.0 and s["n"] == 4
    assert s["wall_ms_per_call"] == 5.0


def test_rwlock_exclusive_waits_for_shared_and_blocks_new_readers():
    lock = RWLock()
    events = []
    lock.acquire_shared()
    writer = threading.Thread(target=lambda: (lock.acquire_exclusive(), events.append("w"), lock.release_exclusive()))
    writer.start()
    while not lock.writers_waiting:  # the writer is queued (not a guess at how long a start takes)
        time.sleep(0.001)
    reader = threading.Thread(target=lambda: (lock.acquire_shared(), events.append("r"), lock.release_shared()))
    reader.start()
    reader.join(0.1)
    assert events == []  # the writer waits for the first reader; the new reader waits for the writer
    lock.release_shared()
    writer.join(5)
    reader.join(5)
    assert events == ["w", "r"]


def test_a_drain_waits_for_whole_sessions_and_a_member_region_does_not_deadlock_with_it():
    # A session (member) holds shared; a drain (the reference's timing) waits until it left. The
    # member's own region and its way back to shared do not wait for the drain (which waits for it),
    # and new members wait for the drain.
    lock = RWLock()
    events = []
    lock.join()
    drain = threading.Thread(target=lambda: (lock.acquire_exclusive(drain=True), events.append("drain"),
                                             lock.release_exclusive()))
    drain.start()
    while not lock.writers_waiting:
        time.sleep(0.001)
    lock.enter_region()  # the member's own region, then back to shared: no deadlock with the drain
    lock.leave_region()
    newcomer = threading.Thread(target=lambda: (lock.join(), events.append("newcomer"), lock.leave()))
    newcomer.start()
    assert events == []  # the drain still waits for the member; the newcomer for the drain
    lock.leave()
    drain.join(5)
    newcomer.join(5)
    assert events == ["drain", "newcomer"]


def test_reference_cache_key_and_persistence(tmp_path):
    cfg = EvalConfig().to_dict()
    k = reference_key("code", 0, 1, "H100", {"torch": "2"}, cfg)
    assert k != reference_key("code", 0, 1, "H200", {"torch": "2"}, cfg)
    assert k != reference_key("code", 0, 1, "H100", {"torch": "2"}, {**cfg, "reference": "compile"})
    ReferenceTimingCache(tmp_path).put(k, {"median_ms": 1.0})
    assert ReferenceTimingCache(tmp_path).get(k) == {"median_ms": 1.0}


def test_channel_close_is_idempotent_and_never_closes_reused_descriptors():
    r, w = os.pipe()
    channel = Channel(r, w)
    channel.close()
    r2, w2 = os.pipe()  # the kernel hands out the numbers just freed
    try:
        channel.close()  # a second close (kill, then discard) must leave the new pipe alone
        os.write(w2, b"x")
        assert os.read(r2, 1) == b"x"
        with pytest.raises(ChannelClosed):
            channel.send({"op": "x"})
    finally:
        os.close(r2)
        os.close(w2)
