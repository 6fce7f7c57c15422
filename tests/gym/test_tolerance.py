"""The tolerance derived from the reference (gym/judge/tolerance.py): trivial answers fail wherever the
reference differs from them; an honest fp32 computation in another order passes; a reference that a
trivial answer meets is named degenerate."""

import torch

from drkernel.gym.judge.compare import compare_outputs
from drkernel.gym.judge.tolerance import ERROR_FACTOR, derive, passes, trivial_answer


def _bounds(fn, *inputs, profile="kernelgym"):
    ref = fn(*inputs)
    ref64 = fn(*(x.double() for x in inputs))
    return ref, derive(ref, ref64, list(inputs), profile)


def test_hand_worked_bound():
    # ref = [0.001, -0.003], ref64 = [0.0010001, -0.003]: err = 1e-7, scale = mean |ref64| = 0.00200005
    # atol' = min(1e-2, max(16 * 1e-7, 1e-2 * 0.00200005)) = 2.00005e-5
    ref = torch.tensor([0.001, -0.003], dtype=torch.float64).float()
    ref64 = torch.tensor([0.0010001, -0.003], dtype=torch.float64)
    (b,) = derive(ref, ref64, [], "kernelgym")
    assert abs(b.scale - 0.00200005) < 1e-9 and abs(b.ref_error - 1e-7) < 1e-9
    assert abs(b.atol - 2.00005e-5) < 1e-9 and b.rtol == 1e-2 and b.degenerate is None


def test_zeros_pass_a_small_output_at_the_profile_atol_and_fail_at_the_derived_one():
    x = torch.randn(64, 4096, generator=torch.Generator().manual_seed(0)) * 0.1
    ref, bounds = _bounds(lambda t: t.mean(dim=1), x)  # values ~ 0.1 / 64, all below atol 1e-2
    zeros = torch.zeros_like(ref)
    assert compare_outputs(zeros, ref, "kernelgym").passed  # the fixed atol hides the whole output
    assert not compare_outputs(zeros, ref, "kernelgym", bounds=bounds).passed
    assert bounds[0].degenerate is None


def test_an_honest_computation_in_another_order_passes():
    x = torch.randn(64, 4096)
    ref, bounds = _bounds(lambda t: t.mean(dim=1), x)
    other = x.reshape(64, 64, 64).sum(dim=2).sum(dim=1) / 4096  # blocked reduction: other rounding
    assert compare_outputs(other, ref, "kernelgym", bounds=bounds).passed
    assert compare_outputs(other, ref, "kernelbench", bounds=_bounds(lambda t: t.mean(dim=1), x, profile="kernelbench")[1]).passed


def test_a_constant_fails_where_the_reference_differs_and_is_degenerate_where_it_does_not():
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(0))
    fn = lambda t: 0.005 * torch.tanh(t) + 0.1  # noqa: E731 - 0.1 +- 0.005: a constant hides at atol 1e-2
    ref, bounds = _bounds(fn, x)
    # derived atol ~ 1e-2 * 0.1 = 1e-3; bound at 0.1 is 1e-3 + 1e-3 < the spread of 0.005 * tanh
    assert compare_outputs(torch.full_like(ref, 0.1), ref, "kernelgym").passed
    assert not compare_outputs(torch.full_like(ref, 0.1), ref, "kernelgym", bounds=bounds).passed
    honest = 0.005 * (1 - 2 / (torch.exp(2 * x) + 1)) + 0.1  # tanh by another formula
    assert compare_outputs(honest, ref, "kernelgym", bounds=bounds).passed
    # a spread inside rtol of the values cannot be told from a constant: named, not passed silently
    _, bounds = _bounds(lambda t: torch.tanh(t * 1e-3) + 0.5, x)
    assert bounds[0].degenerate == "the constant 0.5"


def test_degenerate_references_are_named():
    x = torch.randn(8, 32)
    _, bounds = _bounds(lambda t: t * 0.0, x)
    assert bounds[0].degenerate == "all zeros"
    _, bounds = _bounds(lambda t: torch.clamp(t, 2.0, 2.0), x)
    assert bounds[0].degenerate.startswith("the constant 2")
    _, bounds = _bounds(lambda t: t + 1e-9, x)
    assert bounds[0].degenerate == "input[0] returned unchanged"


def test_the_error_floor_keeps_an_ill_conditioned_reference_passable():
    # a large cancellation: ref = (x + 1e4) - 1e4 in fp32 loses ~1e-3 of absolute precision
    x = torch.randn(4096)
    ref, bounds = _bounds(lambda t: (t + 1e4) - 1e4, x)
    assert bounds[0].ref_error > 1e-4 and bounds[0].atol >= min(1e-2, ERROR_FACTOR * bounds[0].ref_error)
    assert compare_outputs(x.clone(), ref, "kernelgym", bounds=bounds).passed  # the exact answer passes


def test_a_single_value_is_not_degenerate_for_being_its_own_mean():
    loss = torch.tensor(2.3)  # a scalar loss: the mean of one value is the value
    assert trivial_answer(loss, [], 1e-3, 1e-2) is None
    assert trivial_answer(torch.tensor([2.3, 2.3001]), [], 1e-3, 1e-2).startswith("the constant")


def test_passes_and_trivial_answer_on_non_finite_references():
    ref = torch.tensor([0.0, float("nan")])
    assert not passes(0.0, ref, 1.0, 0.0)
    assert trivial_answer(ref, [], 1.0, 0.0) is None


def test_integer_and_scalar_leaves_have_no_derived_bound():
    assert derive((torch.tensor([1, 2]), 3.0), None, [], "kernelgym") == [None, None]


def test_an_aggregate_of_many_inputs_gets_a_derived_relative_term():
    """A cross-entropy's mean over 8192 rows: the reference's own rounding supports far less than 1 %.
    The mean of 7/8 of the rows (what a kernel that skips the rest returns, rescaled) passed the
    profile's rtol and fails the derived one; the same loss summed in another order passes. An output
    with more than 1/64 as many values as its inputs keeps the profile's rtol."""
    g = torch.Generator().manual_seed(3)
    logits, target = torch.randn(8192, 64, generator=g) * 2, torch.randint(0, 64, (8192,), generator=g)

    def loss(x):
        return torch.nn.functional.cross_entropy(x, target)

    ref, bounds = _bounds(loss, logits)
    assert bounds[0].rtol < 1e-3 and bounds[0].atol < 1e-3
    rows = torch.nn.functional.cross_entropy(logits, target, reduction="none")
    part = rows[: 8192 * 7 // 8].mean()
    assert compare_outputs(part, ref, "kernelgym").passed  # inside the profile's 1 % band
    assert not compare_outputs(part, ref, "kernelgym", bounds=bounds).passed
    blocked = rows.reshape(64, 128).sum(dim=1).sum() / 8192  # fp32, another order
    assert compare_outputs(blocked, ref, "kernelgym", bounds=bounds).passed
    _, many = _bounds(lambda x: x.reshape(8192, 16, 4).mean(dim=2), logits)  # 1/4 as many values
    assert many[0].rtol == 1e-2
    _, rows_mean = _bounds(lambda x: x.mean(dim=1), logits)  # 1/64: an aggregate
    assert rows_mean[0].rtol < 1e-3


def test_a_row_sum_of_sigmoids_replaced_by_its_first_order_expansion_fails_and_the_honest_one_passes():
    """Red team 15: sum_j sigmoid(x W^T + b)_j as OUT/2 + (x . colsum(W) + sum(b)) / 4, a matrix-vector
    product in place of the GEMM, is 0.2 % off on plain inputs: inside the profile's 1 %, outside the
    aggregate's derived term. The honest sum, in another order, passes."""
    g = torch.Generator().manual_seed(5)
    x, w, b = torch.randn(256, 1024, generator=g), torch.rand(2048, 1024, generator=g) * 0.0625 - 0.03125, \
        torch.rand(2048, generator=g) * 0.0625 - 0.03125

    def model(x):
        return torch.sigmoid(x @ w.to(x.dtype).T + b.to(x.dtype)).sum(dim=1, keepdim=True)

    ref, bounds = _bounds(model, x)
    taylor = 2048 / 2 + (x @ w.sum(dim=0) + b.sum()).unsqueeze(1) / 4
    assert compare_outputs(taylor, ref, "kernelgym").passed  # the profile's band let it through
    assert not compare_outputs(taylor, ref, "kernelgym", bounds=bounds).passed
    honest = torch.sigmoid(x @ w.T + b).reshape(256, 16, 128).sum(dim=2).sum(dim=1, keepdim=True)
    assert compare_outputs(honest, ref, "kernelgym", bounds=bounds).passed


def test_an_fp16_aggregate_keeps_two_steps_of_its_dtype():
    """A reference that sums in fp32 and casts to fp16 rounds its fp64 run to the same fp16 grid, so its
    own error reads as about 0; an honest kernel whose fp32 sum differs in its last bits lands one fp16
    step away and passes (honest round 13: -30.73 for -30.75), while a sum over 7/8 of the terms fails."""
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(256, 4096, generator=g) * 0.5).half()

    def row_sum(t):
        return t.float().sum(-1).to(torch.float16)

    ref, bounds = _bounds(row_sum, x)
    assert bounds[0].rtol >= 2 * torch.finfo(torch.float16).eps
    step = torch.finfo(torch.float16).eps * ref.float().abs()
    one_off = (ref.float() + step * torch.sign(ref.float())).half()  # about one step of each value
    assert compare_outputs(one_off, ref, "kernelgym", bounds=bounds).passed
    part = (x[:, : 4096 * 7 // 8].float().sum(-1) * 8 / 7).half()
    assert not compare_outputs(part, ref, "kernelgym", bounds=bounds).passed
