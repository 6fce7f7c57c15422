"""A reference whose output does not depend on its inputs is degenerate, whatever trivial answer the
tolerance's probe tried: an answer that ignores the inputs (a broadcast parameter) would pass it."""

from __future__ import annotations

import textwrap

import torch

from drkernel.gym.harness import inputs as harness
from drkernel.gym.ipc import encode_tree
from drkernel.gym.judge.main import Judge
from drkernel.gym.messages import CompareRequest

CPU = torch.device("cpu")
BIAS_ONLY = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        # one channel per group: the normalised value is always 0, so the output is the bias
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.GroupNorm(16, 16)
            self.bias = torch.nn.Parameter(torch.randn(16))
        def forward(self, x):
            return self.norm(x) + self.bias
    def get_inputs():
        return [torch.randn(8, 16)]
""")
DEPENDS = BIAS_ONLY.replace("torch.nn.GroupNorm(16, 16)", "torch.nn.GroupNorm(4, 16)")


def _verdict(code: str, seed: int = 4242):
    judge = Judge(None, CPU)
    model = harness.build_model(harness.load_reference(code).Model, [], 0, CPU)
    args = harness.draw_inputs(harness.load_reference(code), seed, CPU)
    with torch.no_grad():
        out = model(*args)
    tree, blob = encode_tree((out, args))
    return judge.compare(CompareRequest("job", 0, code, seed, 0, "kernelgym", tree, None), blob, [])


def test_an_output_the_same_for_other_inputs_is_degenerate():
    v = _verdict(BIAS_ONLY)
    assert v.passed and v.degenerate == "the reference's output does not depend on its inputs"


def test_an_output_that_follows_its_inputs_is_not():
    v = _verdict(DEPENDS)
    assert v.passed and v.degenerate is None
