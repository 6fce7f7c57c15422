"""The judge's probe of the variant input distributions (gym/judge/main.py): a variant is drawn only
where the reference's outputs are finite and no trivial answer meets them."""

import textwrap

import torch

from drkernel.gym.judge.main import Judge
from drkernel.gym.seeds import Distribution

RELU = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x)
    def get_inputs():
        return [torch.randn(64, 128)]
""")
LOG = RELU.replace("torch.relu(x)", "torch.log(x)").replace("torch.randn", "torch.rand")


def _probe(code):
    return {Distribution(d) for d in Judge(None, torch.device("cpu")).defined_distributions(code, 0)}


def test_a_variant_on_which_the_reference_is_the_identity_is_not_drawn():
    # relu(x + 100) = x + 100: returning the input would pass that trial
    assert _probe(RELU) == {Distribution.WIDE, Distribution.TINY, Distribution.HEAVY, Distribution.SPARSE,
                            Distribution.SIGNED}


def test_a_variant_on_which_the_reference_is_not_finite_is_not_drawn():
    # log of zeros (SPARSE) is -inf and of negative values (SIGNED) NaN; log(x + 100) is 4.6 to within
    # rtol, a constant (SHIFTED)
    assert _probe(LOG) == {Distribution.WIDE, Distribution.TINY, Distribution.HEAVY}
