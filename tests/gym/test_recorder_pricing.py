"""Op pricing the solution cannot steer: a private copy of the FLOP formulas, every op recorded
whatever pricing does (an op it cannot price counts as the reference's whole work), formulas for
backend convolutions, matmuls and attention, and the worst call's profile per op."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import flop_registry

from drkernel.gym.candidate.guards import IntegritySnapshot
from drkernel.gym.candidate.integrity import IntegrityHook
from drkernel.gym.harness.recorder import OpRecorder, memory_bound, record_ops
from drkernel.gym.verdict.coverage import UNPRICED, OpProfile, op_coverage

aten = torch.ops.aten


@pytest.fixture
def registry():
    """torch's FLOP registry, restored after the test whatever it did to it."""
    saved = dict(flop_registry)
    yield flop_registry
    flop_registry.clear()
    flop_registry.update(saved)


def _flops(fn, *args) -> float:
    _, prof = record_ops(fn, *args)
    return prof.flops


def test_pricing_ignores_edits_to_the_live_registry_and_the_snapshot_reports_them(registry):
    a, b = torch.randn(32, 16), torch.randn(16, 8)
    snapshot = IntegritySnapshot().take()
    registry.pop(aten.mm)
    registry[aten.addmm] = lambda *args, **kwargs: 0
    registry[aten.gelu_] = lambda *args, **kwargs: 1 / 0
    _, prof = record_ops(torch.mm, a, b)
    assert prof.ops["aten::mm.default"][2] == 2 * 32 * 16 * 8  # the formula taken at import
    hacks = snapshot.changed()
    assert [h.code for h in hacks] == [8]
    assert all(w in hacks[0].evidence for w in ("removed aten.mm", "replaced aten.addmm", "added aten.gelu_"))


def test_torch_registering_its_own_formulas_is_not_patching():
    snapshot = IntegritySnapshot().take()
    import torch.nn.attention.varlen  # noqa: F401 - adds torch's own formulas to the registry

    assert snapshot.changed() == []


def test_an_op_pricing_cannot_read_is_recorded_unpriced_and_the_error_stays_inside(registry):
    # a sparse operand: the GEMM runs and writes its out=, pricing cannot read the operand's storage
    a, w = torch.randn(8, 16), torch.randn(4, 16).to_sparse()
    out = torch.empty(4, 8)
    registry[aten.relu] = lambda *args, **kwargs: 1 / 0  # a raising formula in the live registry
    with OpRecorder() as rec:
        torch.addmm(torch.zeros(4, 8), w, a.t(), out=out)
        torch.relu(a)
    assert torch.allclose(out, w.to_dense() @ a.t(), atol=1e-5)
    assert rec.profile.unpriced >= 1 and "aten::relu.default" in rec.profile.ops
    ref = OpProfile({"aten::mm.default": [1, 1.0, 0, 0]})
    assert op_coverage(ref, rec.profile, own_launches=1) == 0.0  # counts as the whole reference
    assert op_coverage(ref, OpProfile({"aten::relu.default": [1, 0.1, 0, 0]}), own_launches=1) == pytest.approx(0.9)


def test_compute_outside_formulas_and_memory_bound_ops_is_unpriced_but_the_reference_is_priced():
    q = torch.randn(2, 8, 16)
    weights = (torch.randn(48, 16), torch.randn(48), torch.randn(16, 16), torch.randn(16))

    def mha(t):  # a fused attention block, in neither list
        return aten._native_multi_head_attention(t, t, t, 16, 2, *weights, need_weights=False)

    with OpRecorder() as rec:
        mha(q)
    assert rec.profile.unpriced == 1 and rec.profile.ops["aten::_native_multi_head_attention.default"][1] == 0.0
    _, ref = record_ops(mha, q)  # the trusted reference: one FLOP per element, never unpriced
    assert ref.unpriced == 0 and ref.cost > 0


def test_a_library_op_is_unpriced_whatever_its_name():
    lib = torch.library.Library("drk_pricing_test", "DEF")
    lib.define("relu(Tensor a, Tensor b) -> Tensor")
    lib.impl("relu", lambda a, b: a @ b, "CompositeExplicitAutograd")
    with OpRecorder() as rec:
        torch.ops.drk_pricing_test.relu(torch.randn(4, 4), torch.randn(4, 4))
    assert "drk_pricing_test::relu.default" in rec.profile.ops and rec.profile.unpriced == 1


def test_memory_bound_covers_in_place_list_and_copy_forms():
    assert all(memory_bound(n) for n in ("gelu_", "add_", "_foreach_add_", "permute_copy", "cumsum", "_softmax"))
    assert not any(memory_bound(n) for n in ("mkldnn_convolution", "_foreach_", "conv_tbc", "_sparse_addmm"))


def test_backend_convolutions_cost_what_the_registry_prices_for_the_same_convolution():
    x, w = torch.randn(2, 4, 10, 10), torch.randn(6, 4, 3, 3)
    conv = _flops(lambda a, b: F.conv2d(a, b, dilation=2), x, w)
    assert conv > 0
    assert _flops(lambda a, b: aten.slow_conv_dilated2d(a, b, [3, 3], None, [1, 1], [0, 0], [2, 2]), x, w) == conv
    assert _flops(lambda a, b: aten.mkldnn_convolution(a, b, None, [0, 0], [1, 1], [2, 2], 1), x, w) == conv
    wt = torch.randn(4, 6, 3, 3)  # transposed: (Cin, Cout, kh, kw)
    assert (_flops(lambda a, b: aten.slow_conv_transpose2d(a, b, [3, 3]), x, wt)
            == _flops(lambda a, b: F.conv_transpose2d(a, b), x, wt))
    x3, w3 = torch.randn(1, 2, 5, 5, 5), torch.randn(3, 2, 2, 2, 2)
    assert _flops(lambda a, b: aten.slow_conv3d(a, b, [2, 2, 2]), x3, w3) == _flops(F.conv3d, x3, w3)
    # conv_tbc: input (T, B, Cin), weight (K, Cin, Cout) is conv1d on (B, Cin, T) with (Cout, Cin, K)
    xt, wk = torch.randn(12, 2, 4), torch.randn(3, 4, 5)
    assert (_flops(lambda a, b: torch.conv_tbc(a, b, torch.zeros(5), 0), xt, wk)
            == _flops(lambda a, b: F.conv1d(a.permute(1, 2, 0), b.permute(2, 1, 0)), xt, wk))


def test_matmul_and_attention_variants_cost_their_arithmetic():
    b1, b2 = torch.randn(3, 8, 16), torch.randn(3, 16, 4)
    assert _flops(lambda a, b: torch.addbmm(torch.zeros(8, 4), a, b), b1, b2) == _flops(torch.bmm, b1, b2)
    q, k, v = torch.randn(1, 2, 32, 16), torch.randn(1, 2, 32, 16), torch.randn(1, 2, 32, 16)
    _, prof = record_ops(F.scaled_dot_product_attention, q, k, v)
    # QK^T and PV over 2 heads: 2 * 2 * 32 * 32 * (16 + 16) flops, whichever kernel torch picks
    assert prof.flops >= 2 * 2 * 32 * 32 * 32
    assert prof.unpriced == 0


def test_a_solve_with_many_right_hand_sides_costs_at_least_its_gemm():
    """``cholesky_solve(B, L)`` takes the right-hand side first; with k right-hand sides a solve by an
    n-by-n factor is 2 n^2 k of arithmetic, a GEMM in disguise (red team thirteen priced one from B's
    bytes and had a GEMM paid as the solution's own work)."""
    n, k = 16, 256
    factor = torch.linalg.cholesky(torch.eye(n) * 4 + 0.1 * torch.ones(n, n))
    rhs = torch.randn(n, k)
    gemm = _flops(torch.mm, torch.randn(k, n), torch.randn(n, n))  # 2 n^2 k
    assert _flops(torch.cholesky_solve, rhs, factor) >= gemm
    assert _flops(lambda b, a: torch.linalg.solve_triangular(a, b, upper=False), rhs, factor) >= gemm / 2
    assert _flops(torch.linalg.inv, factor) >= n ** 3  # one matrix, no right-hand side: n^3
    # the factor broadcast over a batch of narrow right-hand sides: 2 n^2 k per batch element
    batched = torch.randn(64, n, 2)
    assert _flops(torch.cholesky_solve, batched, factor) >= 2 * 64 * n * n * 2


def test_worst_keeps_per_op_the_largest_count_and_cost():
    # hand-worked: call A ran 2 reads and an mm of cost 1; call B 900 reads and an mm of cost 0.5
    a = OpProfile({"aten::_local_scalar_dense.default": [2, 0.0, 0, 0], "aten::mm.default": [1, 1.0, 8, 4]})
    b = OpProfile({"aten::_local_scalar_dense.default": [900, 0.0, 0, 0], "aten::mm.default": [1, 0.5, 4, 2],
                   "aten::add.Tensor": [1, 0.2, 1, 1]})
    worst = a.worst(b)
    assert worst.ops == {"aten::_local_scalar_dense.default": [900, 0.0, 0, 0], "aten::mm.default": [1, 1.0, 8, 4],
                         "aten::add.Tensor": [1, 0.2, 1, 1]}


def test_every_observed_call_after_the_first_counts_not_only_the_costliest():
    hook, x = IntegrityHook(), torch.randn(64)
    with torch.no_grad():
        for call in range(4):
            with hook.observe():
                if call == 1:
                    torch.mm(torch.randn(8, 8), torch.randn(8, 8))  # the one costly call
                if call == 3:
                    [float(x[i]) for i in range(64)]  # computing on the host, at no PyTorch cost
    profile = hook.coverage_profile
    assert profile["aten::mm.default"][0] == 1
    assert profile["aten::_local_scalar_dense.default"][0] == 64  # the host-read call is counted too


def test_a_gemm_spelt_as_a_gather_or_a_pairwise_distance_costs_its_arithmetic():
    """A weighted ``embedding_bag`` whose indices walk the table once per row of A is A @ B; pdist of
    [A; B^T] holds every A-row/B-column pair: both do (at least) the GEMM's multiply-adds, and are
    priced so, not as one pass over their operands."""
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    idx, offsets = torch.arange(32).repeat(64), torch.arange(0, 64 * 32, 32)
    with OpRecorder() as r:
        out = F.embedding_bag(idx, b, offsets, mode="sum", per_sample_weights=a.reshape(-1))
        F.pdist(torch.cat([a, b.T]))
    assert torch.allclose(out, a @ b, atol=1e-4)
    gemm = 2 * 64 * 32 * 48
    flops = {name.split("::")[1].split(".")[0]: v[2] for name, v in r.profile.to_dict().items()}
    assert flops["_embedding_bag_forward_only"] >= gemm and flops["_pdist_forward"] >= gemm


def test_a_solution_op_is_priced_no_faster_than_its_reference_contracts():
    """An fp32 GEMM's reference sets the cap: the same GEMM cast to half precision and run by torch
    costs what the reference's fp32 one does, not the tensor-core price (a fifteenth)."""
    from drkernel.gym.roofline import NOMINAL_BANDWIDTH

    a, b = torch.empty(4096, 4096, device="meta"), torch.empty(4096, 4096, device="meta")  # shapes only
    _, reference = record_ops(torch.mm, a, b)
    cap = reference.contraction_rate(NOMINAL_BANDWIDTH)
    assert cap is not None and cap == pytest.approx(67e12)
    with OpRecorder() as free, torch.no_grad():
        torch.mm(a.half(), b.half())
    with OpRecorder(rate_cap=cap) as capped, torch.no_grad():
        torch.mm(a.half(), b.half())
    cost = lambda p: sum(v[1] for k, v in p.to_dict().items() if "mm" in k)  # noqa: E731
    assert cost(capped.profile) >= 0.99 * reference.cost > 10 * cost(free.profile) > 0


def test_a_complex_contraction_costs_its_real_arithmetic():
    """(A_top + i A_bot) @ B is both halves of a real GEMM in one complex mm: four real multiply-adds
    per complex one, priced so."""
    a, b = torch.randn(64, 32), torch.randn(32, 48)
    _, real = record_ops(torch.mm, torch.cat([a, a]), b)
    _, packed = record_ops(torch.mm, torch.complex(a, a), torch.complex(b, torch.zeros_like(b)))
    assert packed.flops >= real.flops


def test_an_op_in_place_or_over_its_input_costs_what_it_costs_out_of_place():
    """An in-place op, or one writing over its input through ``out=``, reads and writes the same memory:
    priced by distinct operands it cost half the op out of place (red team 8: a Triton copy and an
    in-place silu read as half the work)."""
    import torch

    from drkernel.gym.harness.recorder import op_cost

    x = torch.randn(1024)
    plain = op_cost(torch.ops.aten.silu.default, (x,), {}, torch.ops.aten.silu.default(x))[2]
    assert plain == 2 * 1024 * 4
    y = x.clone()
    assert op_cost(torch.ops.aten.silu_.default, (y,), {}, y)[2] == plain
    out = torch.empty(1024)
    assert op_cost(torch.ops.aten.silu.out, (x,), {"out": out}, out)[2] == plain  # out= is written, not read
    assert op_cost(torch.ops.aten.silu.out, (x,), {"out": x}, x)[2] == plain


def test_a_tensor_with_its_own_numel_is_priced_as_a_tensor():
    """The recorder reads sizes through the class: an instance attribute ``numel`` (or ``element_size``)
    on the solution's tensors priced the ops they took part in at zero."""
    x, out = torch.randn(64, 64), torch.empty(64, 64)
    with OpRecorder() as honest:
        torch.sigmoid(x, out=out)
    for t in (x, out):
        t.numel = lambda: 0
        t.element_size = lambda: 0
    with OpRecorder() as shadowed:
        torch.sigmoid(x, out=out)
    assert shadowed.profile.cost == honest.profile.cost > 0


def test_tritons_own_benchmarking_copies_are_not_the_solutions_compute():
    """Honest round 13: lion-pytorch's ``@triton.autotune(restore_value=...)`` clones and copies its
    arguments around every benchmarked run; on the H100 those copies, priced as the solution's, took op
    coverage to 0 (hack 2). While the autotuner benchmarks (`recorder.autotuning`), an op issued by
    code of Triton's package is its bookkeeping and is not recorded; the same op issued by the
    solution's own code (a hook of its own) still is, and so is Triton's outside benchmarking."""
    from drkernel.gym.harness import recorder

    namespace: dict = {}  # a stand-in for autotuner.py's hooks, as a file of Triton's package
    exec(compile("import torch\ndef restore(t):\n    return t.clone().copy_(t)\n"
                 "def compute(t):\n    return torch.nn.functional.gelu(t)\n",
                 recorder._TRITON_DIR + "runtime/autotuner_standin.py", "exec"), namespace)

    def own_hook(t):
        return t.clone().copy_(t)

    x = torch.randn(64)
    with OpRecorder() as rec, recorder.autotuning():
        namespace["restore"](x)
    assert not rec.profile.ops, rec.profile.ops
    with OpRecorder() as rec, recorder.autotuning():  # compute from Triton's frame (a hijacked clone): recorded
        namespace["compute"](x)
    assert "aten::gelu.default" in rec.profile.ops, rec.profile.ops
    with OpRecorder() as rec, recorder.autotuning():
        own_hook(x)
    assert "aten::clone.default" in rec.profile.ops, rec.profile.ops
    with OpRecorder() as rec:
        namespace["restore"](x)
    assert rec.profile.ops
