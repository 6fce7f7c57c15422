"""The judge's comparison: the few-pass path for plain chunks (`compare._plain_chunk`) decides exactly as
the careful path does, on outputs with and without NaN, Inf, overflow and errors near the bound."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from drkernel.gym.judge import compare
from drkernel.gym.judge.compare import compare_outputs


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(4096, generator=g) * 3
    near = ref + (1e-2 + 1e-2 * ref.abs()) * torch.empty_like(ref).uniform_(-0.99, 0.99, generator=g)
    cases = [("equal", ref.clone(), ref), ("within", near, ref), ("zeros", torch.zeros(7), torch.zeros(7)),
             ("empty", torch.zeros(0), torch.zeros(0))]
    for name, value in (("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf")), ("big", 1e3)):
        out = near.clone()
        out[1234] = value
        cases.append((f"out {name}", out, ref))
        r = ref.clone()
        r[77] = value
        cases.append((f"ref {name}", near.clone(), r))
        both = near.clone()
        both[77] = value
        cases.append((f"both {name}", both, r))
    over = torch.tensor([3e38, 1.0])
    cases.append(("overflowing difference", over, -over))
    cases.append(("inf ref, finite out", torch.tensor([5.0, 1.0]), torch.tensor([float("inf"), 1.0])))
    cases.append(("just outside", ref + 1e-2 + 1e-2 * ref.abs() + 1e-3, ref))
    cases.append(("half", near.half(), ref.half()))
    cases.append(("int", torch.arange(9), torch.arange(9)))
    return cases


@pytest.mark.parametrize("name,out,ref", _cases(), ids=[c[0] for c in _cases()])
def test_the_plain_path_decides_as_the_careful_path(name, out, ref, monkeypatch):
    for profile, slack in (("kernelgym", None), ("kernelbench", None), ("kernelgym", [0.5])):
        fast = compare_outputs(out, ref, profile, slack)
        with monkeypatch.context() as m:
            m.setattr(compare, "_plain_chunk", lambda *a: None)
            careful = compare_outputs(out, ref, profile, slack)
        assert dataclasses.asdict(fast) == dataclasses.asdict(careful), (name, profile, slack)


def test_plain_chunks_take_the_plain_path_and_special_values_do_not(monkeypatch):
    taken = []
    plain = compare._plain_chunk
    monkeypatch.setattr(compare, "_plain_chunk", lambda *a: taken.append(r := plain(*a)) or r)
    monkeypatch.setattr(compare, "CHUNK", 1000)  # several chunks
    ref = torch.randn(3500)
    assert compare_outputs(ref.clone(), ref, "kernelgym").passed
    assert len(taken) == 4 and None not in taken
    out = ref.clone()
    out[2500] = float("nan")
    taken.clear()
    c = compare_outputs(out, ref, "kernelgym")
    assert not c.passed and "NaN at flat index 2500" in c.message
    assert taken[:2] != [None, None] and taken[2] is None  # the third chunk went the careful way


def test_integer_outputs_allow_only_a_few_rounding_ties():
    """An int8 quantiser whose kernel divides a little differently from the reference: a few values one
    step off pass (an ulp at a half step: 2 of 131,072 on an H100); two steps off, one off in more than
    1e-4 of the values, or any difference in a small output fails, and a bool mask follows the same rule."""
    g = torch.Generator().manual_seed(1)
    ref = torch.randint(-100, 101, (131072,), generator=g, dtype=torch.int8)

    def judged(out: torch.Tensor, r: torch.Tensor = ref) -> bool:
        return compare_outputs(out, r, "kernelgym").passed

    ties = ref.clone()
    ties[[5, 90001]] += 1
    assert judged(ties)
    two_steps = ref.clone()
    two_steps[5] += 2
    assert not judged(two_steps)
    many = ref.clone()
    many[:14] -= 1  # 14 > 131072 * 1e-4
    assert not judged(many)
    small = ref[:9000].clone()
    small[0] += 1  # under 10,000 values: exact
    assert not judged(small, ref[:9000])
    mask = ref > 0
    flipped = mask.clone()
    flipped[3] = ~flipped[3]
    assert judged(flipped, mask)
    assert not judged(~mask, mask)
