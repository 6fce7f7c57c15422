"""TF32 slack on every trial (gym/judge/compare.py): an allowed TF32 GEMM must pass a trial drawn at a
wider scale, and a dropped term must still fail where the reference has no matmul (no slack)."""

import torch

from drkernel.gym.harness.recorder import record_ops
from drkernel.gym.judge.compare import TF32_OPS, TF32_SLACK, compare_outputs, tf32_slack
from drkernel.gym.verdict.coverage import base_name


def test_slack_is_a_multiple_of_the_tf32_reference_deviation_per_leaf():
    ref = (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([5.0]))
    tf32 = (torch.tensor([1.0, 2.5, 3.0]), torch.tensor([5.0]))  # leaf 0 deviates by 0.5, leaf 1 not at all
    assert tf32_slack(ref, tf32) == [TF32_SLACK * 0.5, 0.0]


def test_a_tf32_sized_error_passes_only_with_slack():
    # hand-worked: |out - ref| = 0.8 at index 1; kernelgym atol = rtol = 1e-2, |ref| = 18.7
    # bound without slack: 0.01 + 0.01 * 18.7 = 0.197 < 0.8 (fails); with slack 4 x 0.3 = 1.2 it passes
    ref = torch.tensor([0.0, 18.7, -3.0])
    out = torch.tensor([0.0, 19.5, -3.0])
    assert not compare_outputs(out, ref, "kernelgym").passed
    slack = tf32_slack(ref, torch.tensor([0.0, 19.0, -3.0]))
    assert compare_outputs(out, ref, "kernelgym", slack).passed


def test_no_matmul_no_slack_so_a_dropped_term_still_fails():
    x = torch.randn(8, 4096) * 8
    ref = x + torch.softmax(x, dim=-1)
    slack = tf32_slack(ref, ref.clone())  # a reference without matmuls: TF32 changes nothing
    assert slack == [0.0]
    c = compare_outputs(x, ref, "kernelgym", slack)  # the solution returned x and dropped softmax(x)
    assert not c.passed and "TF32 slack" not in c.message


def test_the_ops_that_earn_a_slack_are_named_as_the_recorder_names_them():
    """The judge skips the TF32 re-run when no recorded op is in `TF32_OPS`: a name drift between the
    recorder and that set would silently take the slack away from every GEMM and convolution."""
    linear, conv = torch.nn.Linear(16, 8), torch.nn.Conv2d(3, 4, 3)
    cases = [(linear, torch.randn(4, 16), True), (conv, torch.randn(1, 3, 8, 8), True),
             (lambda a, b: torch.bmm(a, b), (torch.randn(2, 3, 4), torch.randn(2, 4, 5)), True),
             (torch.relu, torch.randn(64), False), (lambda x: torch.softmax(x * 2 + 1, -1), torch.randn(4, 8), False)]
    for fn, args, expected in cases:
        args = args if isinstance(args, tuple) else (args,)
        _, profile = record_ops(fn, *args)
        assert any(base_name(op) in TF32_OPS for op in profile.ops) is expected, (fn, sorted(profile.ops))
