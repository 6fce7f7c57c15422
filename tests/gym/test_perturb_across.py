"""The across-rows perturbation mode (gym/harness/perturb.py, gym/seeds.py ``ACROSS_BIT``): for outputs no
within-row swap moves (a row mean, a scalar loss), swaps reach across rows and the swapped values are
scaled, keeping the zero pattern, the signs and a symmetric matrix's symmetry; the timed calls' variation
agrees with the judge's draw in that mode too; and a cache keyed on sampled values is served stale."""

from __future__ import annotations

import textwrap
import types

import torch

from drkernel.gym.harness import inputs as harness
from drkernel.gym.harness.perturb import perturb
from drkernel.gym.ipc import encode_tree
from drkernel.gym.judge.main import Judge
from drkernel.gym.messages import CompareRequest
from drkernel.gym.seeds import PERTURB_TAGS, across_rows, perturbed, timed_step, with_across

CPU = torch.device("cpu")
MEAN_ROWS = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=-1)
    def get_inputs():
        return [torch.randn(64, 512)]
""")


def _stale_passes(seed: int) -> list[bool]:
    """Does the trial's own row mean (a cache that missed the perturbation) pass each perturbed step?"""
    judge, ref = Judge(None, CPU), harness.load_reference(MEAN_ROWS)
    (base,) = harness.draw_inputs(ref, seed, CPU)
    tree, blob = encode_tree(base.mean(dim=-1))
    return [judge.compare(CompareRequest("job", 0, MEAN_ROWS, seed, 0, "kernelgym", tree, tag), blob, []).passed
            for tag in PERTURB_TAGS]


def test_a_stale_row_mean_passes_within_row_swaps_and_fails_across_rows():
    assert _stale_passes(4_242) == [True, True]  # what the caching check could not see
    assert _stale_passes(with_across(4_242, True)) == [False, False]


def test_across_rows_keeps_zeros_signs_and_symmetry():
    m = torch.randn(3, 40, 40)
    sym = torch.tril(m) + torch.tril(m, -1).mT
    tri = torch.tril(torch.randn(64, 64))
    seed = perturbed(with_across(77, True), 1)
    new_sym, new_tri = perturb([sym.clone(), tri.clone()], seed)
    assert torch.equal(new_sym, new_sym.mT) and not torch.equal(new_sym, sym)
    assert torch.equal(new_tri == 0, tri == 0)
    assert torch.equal(new_tri.sign().flatten().sort().values, tri.sign().flatten().sort().values)  # moved, not flipped
    moved = (new_tri != tri).nonzero()[:, 0]
    assert moved.unique().numel() > 1  # the swapped values come from more than one row
    rows_before, rows_after = tri.sum(1), new_tri.sum(1)
    assert not torch.allclose(rows_before, rows_after)  # row sums move: a row mean sees it


def test_a_timed_call_draws_afresh_in_the_across_rows_mode_too():
    ref = types.SimpleNamespace(get_inputs=lambda: [torch.randn(64, 1024), torch.randint(0, 9, (300,)),
                                                    torch.zeros(5, 5), 3])
    seed = with_across(31_337, True)
    base = harness.draw_inputs(ref, seed, CPU)
    draw = harness.TimedDraws(ref, seed, CPU)
    for call in (0, 7, 19):
        args = draw(call)
        drawn = harness.draw_inputs(ref, perturbed(seed, timed_step(call)), CPU)
        assert across_rows(perturbed(seed, timed_step(call)))
        assert all(torch.equal(a, d) for a, d in zip(args[:3], drawn[:3]))
        assert float((args[0] == base[0]).float().mean()) < 0.01 and torch.equal(args[2], base[2])
