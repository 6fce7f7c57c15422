"""The judge's probes at prepare (gym/judge/main.py): a distribution (plain included) is drawn only
where the reference's outputs are finite and no trivial answer meets them; a problem whose outputs no
within-row swap moves gets perturbations across rows."""

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
    assert _probe(RELU) == {Distribution.PLAIN, Distribution.WIDE, Distribution.TINY, Distribution.HEAVY,
                            Distribution.SPARSE, Distribution.SIGNED}


def test_a_variant_on_which_the_reference_is_not_finite_is_not_drawn():
    # log of zeros (SPARSE) is -inf and of negative values (SIGNED) NaN; log(x + 100) is 4.6 to within
    # rtol, a constant (SHIFTED)
    assert _probe(LOG) == {Distribution.PLAIN, Distribution.WIDE, Distribution.TINY, Distribution.HEAVY}


def test_plain_inputs_on_which_a_trivial_answer_passes_are_not_drawn():
    # relu(x - 2) of rand inputs in [0, 1) is all zeros; scaled by 8 (WIDE) it is not
    probe = _probe(RELU.replace("torch.relu(x)", "torch.relu(x - 2)").replace("torch.randn", "torch.rand"))
    assert Distribution.PLAIN not in probe and Distribution.WIDE in probe


MEAN_ROWS = RELU.replace("torch.relu(x)", "x.mean(dim=-1)")
MSE = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, p, t):
            return torch.mean((p - t) ** 2)
    def get_inputs():
        return [torch.randn(64, 512), torch.randn(64, 512)]
""")


def _unseen(code):
    judge = Judge(None, torch.device("cpu"))
    return judge.swaps_unseen(code, 0, judge.defined_distributions(code, 0))


def test_outputs_blind_to_within_row_swaps_switch_the_problem_to_swaps_across_rows():
    assert _unseen(MEAN_ROWS) and _unseen(MSE)  # a row mean never moves; a scalar loss by O(1/n)
    assert not _unseen(RELU)  # an elementwise output moves where a value moved


LSE_OF_GEMM = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(16, 16)
        def forward(self, x):
            return torch.logsumexp(self.linear(x), dim=1, keepdim=True)
    def get_inputs():
        return [torch.rand(64, 16)]
    def get_init_inputs():
        return []
""")


def test_the_probe_draws_inputs_independent_of_the_weights():
    # the logsumexp over 16 features of a GEMM of shifted rand inputs is a constant within tolerance;
    # drawn at the weight seed itself the inputs correlate with the weights and it is not (over 512
    # features, this test's earlier case, the logsumexp is an aggregate now: its derived relative term
    # tells the rows of every draw apart)
    assert _probe(LSE_OF_GEMM) == {Distribution.PLAIN, Distribution.WIDE, Distribution.HEAVY, Distribution.SPARSE,
                                   Distribution.SIGNED}
