"""Op coverage: roofline costs of aten ops, the recorder suspended inside Triton launches, and the
coverage formula; time coverage from kernel records."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from drkernel.gym.harness.recorder import H100, OpRecorder, launch_scope, op_name, record_ops
from drkernel.gym.verdict.coverage import ALWAYS_ALLOWED, OpProfile, base_name, op_coverage, time_coverage
from drkernel.gym.result import KernelStat


def test_matmul_cost_is_roofline_of_flops_and_bytes():
    a, b = torch.randn(64, 32), torch.randn(32, 16)
    _, prof = record_ops(torch.mm, a, b)
    count, cost, flops, nbytes = prof.ops["aten::mm.default"]
    assert count == 1 and flops == 2 * 64 * 32 * 16
    assert nbytes == 4 * (64 * 32 + 32 * 16 + 64 * 16)
    assert cost == pytest.approx(max(flops / H100.fp32_flops, nbytes / H100.bandwidth))


def test_fp16_matmul_uses_tensor_core_peak():
    a = torch.randn(256, 256, dtype=torch.float16)
    _, prof = record_ops(torch.mm, a, a)
    _, cost, flops, nbytes = prof.ops["aten::mm.default"]
    assert cost == pytest.approx(max(flops / H100.tensor_flops, nbytes / H100.bandwidth))


def test_elementwise_cost_counts_input_and_output_bytes():
    x = torch.randn(1000)
    _, prof = record_ops(torch.relu, x)
    assert prof.ops["aten::relu.default"][3] == 8000
    assert prof.cost == pytest.approx(8000 / H100.bandwidth)


def test_allocation_and_views_cost_nothing():
    x = torch.randn(8, 8)
    _, prof = record_ops(lambda t: torch.empty_like(t).view(-1).t().contiguous().reshape(4, 16), x)
    assert prof.ops and prof.compute_ops() == {} and prof.cost == 0.0
    assert all(base_name(k) in ALWAYS_ALLOWED for k in prof.ops)


def test_copies_and_casts_cost_the_bytes_they_move_but_stay_always_allowed():
    # hand-worked: 64 fp32 values; the cast reads 256 bytes and writes 512, the clone reads and writes 512,
    # the contiguous of the transposed view reads and writes 256
    x = torch.randn(8, 8)
    _, prof = record_ops(lambda t: (t.to(torch.float64).clone(), t.t().contiguous()), x)
    assert prof.ops["aten::_to_copy.default"][3] == 768 and prof.ops["aten::clone.default"][3] == 2 * 512 + 512
    assert prof.compute_ops() == {}  # the strict allowlist does not see copies
    assert prof.cost == pytest.approx(prof.bytes / H100.bandwidth)
    # a round trip through int is a trunc: priced like the trunc it computes (two passes of bytes)
    _, trunc = record_ops(torch.trunc, x)
    _, trip = record_ops(lambda t: t.to(torch.int32).to(torch.float32), x)
    assert trip.cost >= trunc.cost


def test_a_copy_of_memory_onto_itself_is_free_anything_else_costs_inside_a_launch_too():
    x, y = torch.randn(64), torch.empty(64)
    with OpRecorder() as rec:
        with launch_scope():
            x.copy_(x)  # the interpreter's argument handling
        assert rec.profile.cost == 0.0
        with launch_scope():
            y.copy_(x.flip(0).view(8, 8).t().reshape(-1))  # a permuting copy inside a grid callable
    assert rec.profile.ops["aten::copy_.default"][3] == 512


def test_compute_outside_the_flop_registry_is_priced_by_its_arithmetic():
    # F.bilinear is a GEMM: 2 * B * O * I * J flops through _trilinear, not one flop per element
    b, o, i, j = 64, 32, 128, 128
    x1, x2, w = torch.randn(b, i), torch.randn(b, j), torch.randn(o, i, j)
    _, prof = record_ops(lambda a, c, m: torch.nn.functional.bilinear(a, c, m), x1, x2, w)
    assert prof.ops["aten::_trilinear.default"][2] == 2 * b * o * i * j
    _, ref = record_ops(lambda a, c, m: torch.einsum("bi,oij,bj->bo", a, m, c), x1, x2, w)
    assert prof.cost >= 0.25 * ref.cost  # the same contraction costs the same order either way
    _, inv = record_ops(torch.linalg.inv, torch.randn(4, 32, 32))
    assert inv.flops >= 4 * 32 ** 3


def test_op_names_and_strict_allowlist():
    x = torch.randn(4)
    _, prof = record_ops(lambda t: torch.relu(t) + 1, x)
    assert set(prof.compute_ops()) == {"aten::relu.default", "aten::add.Tensor"}
    assert set(prof.outside(("aten::add.Tensor",))) == {"aten::relu.default"}
    assert prof.outside(("relu", "add")) == {}
    assert op_name(torch.ops.aten.add.Tensor) == "aten::add.Tensor"


def test_launch_scope_frees_argument_handling_but_counts_compute():
    x = torch.randn(16)

    def fn(t):
        with launch_scope():  # the interpreter's argument handling: allocation and copies (free)
            torch.empty_like(t).copy_(t)
        with launch_scope():  # a grid callable or pre-run hook running PyTorch: the solution's compute
            torch.softmax(t, 0)
        return t + 1

    _, prof = record_ops(fn, x)
    assert set(prof.compute_ops()) == {"aten::add.Tensor", "aten::_softmax.default"}


def test_materialising_copies_cost_their_bytes_ordinary_copies_do_not():
    x = torch.randn(64)
    _, repeat = record_ops(lambda t: t.expand(256, 64).reshape(-1), x)  # a repeat built from free ops
    _, cast = record_ops(lambda t: t.double().contiguous(), x)
    _, transpose = record_ops(lambda t: t.view(8, 8).t().contiguous(), x)
    assert set(repeat.compute_ops()) == {"aten::materialise_clone.default"}
    assert repeat.bytes == 256 * 64 * 4 and repeat.cost > 0
    assert cast.compute_ops() == {} and transpose.compute_ops() == {}


def test_op_coverage_formula():
    ref = OpProfile({"aten::mm.default": [1, 3.0, 0, 0], "aten::relu.default": [1, 1.0, 0, 0]})
    lazy = OpProfile({"aten::mm.default": [1, 3.0, 0, 0]})
    assert op_coverage(ref, lazy, own_launches=1) == pytest.approx(0.25)
    assert op_coverage(ref, OpProfile(), own_launches=2) == 1.0
    assert op_coverage(ref, OpProfile(), own_launches=0) == 0.0  # nothing of its own ran
    assert op_coverage(ref, OpProfile({"aten::mm.default": [2, 6.0, 0, 0]}), own_launches=1) == 0.0
    assert OpProfile.from_dict(ref.to_dict()).ops == ref.ops


def test_time_coverage_matches_own_kernels_only():
    kernels = [KernelStat("relu_kernel", True, 1, 3.0), KernelStat("ampere_sgemm", False, 1, 1.0)]
    assert time_coverage(kernels) == pytest.approx(0.75)
    assert time_coverage([KernelStat("k", True, 1)]) is None


INTERPRETED = textwrap.dedent('''
    import os, json
    import torch, triton, triton.language as tl
    import triton.runtime.interpreter as interp
    from drkernel.gym.harness.recorder import launch_scope, record_ops
    from drkernel.gym.verdict.coverage import op_coverage

    original = interp.InterpretedFunction.run
    launches = []
    def run(self, *a, **k):
        launches.append(self.fn.__name__)
        with launch_scope():
            return original(self, *a, **k)
    interp.InterpretedFunction.run = run

    @triton.jit
    def relu_k(x, y, n, B: tl.constexpr):
        o = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(y + o, tl.maximum(tl.load(x + o, mask=o < n), 0.0), mask=o < n)

    a, b = torch.randn(64, 64), torch.randn(64, 64)
    def relu(h):
        y = torch.empty_like(h)
        relu_k[(triton.cdiv(h.numel(), 1024),)](h, y, h.numel(), B=1024)
        return y
    _, ref = record_ops(lambda a, b: torch.relu(a @ b), a, b)
    _, gold = record_ops(lambda a, b: relu(a) , a, b)
    _, lazy = record_ops(lambda a, b: relu(a @ b), a, b)
    print(json.dumps({"gold_ops": sorted(gold.compute_ops()), "lazy": op_coverage(ref, lazy, 1),
                      "gold": op_coverage(ref, gold, 1), "launches": len(launches)}))
''')


def test_recorder_is_suspended_inside_interpreted_triton_launches():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", INTERPRETED], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["launches"] == 2
    assert got["gold_ops"] == [] and got["gold"] == 1.0
    # mm of 64x64 fp32 is memory-bound on the nominal device: 48 KiB against relu's 32 KiB.
    assert got["lazy"] == pytest.approx(32 / (48 + 32), rel=1e-3)


def test_low_time_coverage_with_a_low_speedup_is_a_reason_not_to_pay():
    from drkernel.gym.verdict.coverage import TIME_COVERAGE_FLOOR, time_coverage_hack

    # hand-worked: 0.02 of the device time in own kernels at 0.008x -> flagged; 0.5 or 1.2x -> not
    assert "0.0200" not in (time_coverage_hack(0.02, 0.008) or "") and "2.00%" in time_coverage_hack(0.02, 0.008)
    assert time_coverage_hack(0.0003, None) is not None  # not compared: no speed to excuse it
    assert time_coverage_hack(0.5, 0.008) is None and time_coverage_hack(0.02, 1.2) is None
    assert time_coverage_hack(None, 0.5) is None  # CPU: no device times
    assert time_coverage_hack(TIME_COVERAGE_FLOOR, 0.5) is None


def test_writing_a_fresh_result_into_place_is_part_of_its_op_but_copying_an_input_is_not():
    # y[:k] = torch.softmax(...) is the out= idiom: the softmax's own bytes already count its write
    x = torch.randn(64, 128)

    def into_place(t):
        y = torch.empty_like(t)
        y[:48] = torch.softmax(t[:48], dim=1)
        return y

    _, prof = record_ops(into_place, x)
    _, plain = record_ops(lambda t: torch.softmax(t[:48], dim=1), x)
    assert prof.cost == pytest.approx(plain.cost)
    _, copied = record_ops(lambda t: torch.empty_like(t).copy_(t), x)  # an input copied: 2 x 32 KiB
    assert copied.ops["aten::copy_.default"][3] == 2 * 64 * 128 * 4


def test_time_coverage_rule_reads_the_speedups_interval():
    """A solution as fast as the reference is at 1.0 within noise: the interval's upper end decides,
    so a run at 0.997x (interval up to 1.004x) and its replay at 1.002x get the same verdict."""
    from drkernel.gym.verdict.coverage import time_coverage_hack

    assert time_coverage_hack(0.06, 0.997, speedup_high=1.004) is None
    assert time_coverage_hack(0.06, 1.002, speedup_high=1.009) is None
    flagged = time_coverage_hack(0.06, 0.95, speedup_high=0.97)
    assert flagged is not None and "0.97x" in flagged
    assert time_coverage_hack(0.06, 0.95) is not None  # no interval: the point estimate decides
