"""The static device-memory estimate used for admission."""

from __future__ import annotations

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.problems import load_problems
from drkernel.problems.problem import Problem
import pytest

from drkernel.service import admission
from drkernel.service.admission import FOOTPRINT_FACTOR, OVERHEAD_BYTES, Unreadable, estimate_device_bytes

REF = """
import torch
batch_size = 16
dim = 2 * 512
def get_inputs():
    x = torch.randn(batch_size, dim)
    idx = torch.randint(0, 10, (batch_size,))
    return [x, idx, 3]
def get_init_inputs():
    return []
"""


def test_hand_worked_estimate():
    p = Problem(name="t", level=1, code=REF)
    # randn: 16 * 1024 = 16384 elements; randint size (16,): 16 elements; the int 3 is not a tensor
    expected = OVERHEAD_BYTES + FOOTPRINT_FACTOR * (16384 + 16) * 4
    assert estimate_device_bytes(EvalRequest(p, "", EvalConfig(device="cuda"))) == expected


def test_cpu_overrides_and_cpu_budget_shrink_the_estimate_only_where_the_judge_scales():
    p = Problem(name="t", level=1, code=REF, cpu_overrides={"batch_size": 2})
    scaled = estimate_device_bytes(EvalRequest(p, "", EvalConfig(device="cpu", cpu_element_budget=10**6)))
    assert scaled == OVERHEAD_BYTES + FOOTPRINT_FACTOR * (2 * 1024 + 2) * 4
    capped = estimate_device_bytes(EvalRequest(p, "", EvalConfig(device="cpu", cpu_element_budget=100)))
    assert capped == OVERHEAD_BYTES + FOOTPRINT_FACTOR * 100 * 4
    # unscaled, the judge prepares the problem at its own sizes: so does the estimate (it was the
    # overrides' size, so a full-size problem was admitted beside others as if it were small)
    unscaled = estimate_device_bytes(EvalRequest(p, "", EvalConfig(device="cpu", cpu_scale=False)))
    assert unscaled == OVERHEAD_BYTES + FOOTPRINT_FACTOR * (16384 + 16) * 4


def test_kernelbench_problems_rank_by_size(kernelbench_rows):
    problems = {(p.level, p.problem_id): p for p in load_problems(str(kernelbench_rows))}
    est = {
        k: estimate_device_bytes(EvalRequest(p, "", EvalConfig(device="cuda"))) for k, p in problems.items()
    }
    # problem 1 multiplies two 4096 x 4096 fp32 matrices: 2 * 4096**2 elements
    assert est[(1, 1)] == OVERHEAD_BYTES + FOOTPRINT_FACTOR * 2 * 4096**2 * 4
    assert all(v > OVERHEAD_BYTES for v in est.values())  # every shape of the 200 is understood


def test_unparseable_reference_gets_the_overhead_only():
    p = Problem(name="t", level=1, code="def (")
    assert estimate_device_bytes(EvalRequest(p, "")) == OVERHEAD_BYTES


def test_size_constants_are_bounded_not_computed():
    """N = 2**62 and a constant squared 40 times are unknown (past 2**48), so the only tensor with a
    static size is randn(8): 8 elements; the estimate stays an int SQLite can hold."""
    squares = "\n".join(["B = 3"] + ["B = B * B"] * 40)
    code = f"import torch\nN = 2**62\n{squares}\ndef get_inputs():\n    return [torch.randn(N), torch.randn(B), torch.randn(8)]\n"
    est = estimate_device_bytes(EvalRequest(Problem(name="big", level=1, code=code), "", EvalConfig(device="cuda")))
    assert est == OVERHEAD_BYTES + FOOTPRINT_FACTOR * 8 * 4


def test_what_admission_remembers_is_a_digest_whatever_the_code_size():
    """200 distinct 4-kB references: the remembered entries hold none of their code."""
    pad = "#" * 4_000
    for i in range(200):
        code = f"{REF}\n# {i}\n{pad}\n"
        assert estimate_device_bytes(EvalRequest(Problem(name="t", level=1, code=code), "",
                                                 EvalConfig(device="cuda"))) > OVERHEAD_BYTES
    assert len(admission._elements) <= admission.ELEMENTS_CACHE_ENTRIES
    assert all(len(digest) == 32 and not any(isinstance(v, str) and len(v) > 100 for v in overrides)
               for digest, overrides in admission._elements)


def test_code_too_deep_to_parse_is_unreadable_and_a_deep_constant_is_unknown():
    deep = "N = " + "+".join(["1"] * 6000) + "\n"
    with pytest.raises(Unreadable):
        estimate_device_bytes(EvalRequest(Problem(name="t", level=1, code=deep + REF), "", EvalConfig()))
    folded = "M = " + "+".join(["1"] * 1200) + "\n"  # parses; too deep to fold: M is unknown, not the code
    p = Problem(name="t", level=1, code=folded + REF)
    expected = OVERHEAD_BYTES + FOOTPRINT_FACTOR * (16384 + 16) * 4
    assert estimate_device_bytes(EvalRequest(p, "", EvalConfig(device="cuda"))) == expected


def _req(code: str) -> EvalRequest:
    return EvalRequest(Problem(name="t", level=1, code=code), "", EvalConfig(device="cuda"))


def test_a_large_source_is_read_in_a_child_with_the_same_answer():
    """Past INLINE_READ_BYTES the reading runs in a child process: same estimate as the inline read
    (randn(16, 1024) and randint size (16,))."""
    big = REF + "\n" + "pad = 0\n" * (admission.INLINE_READ_BYTES // 8 + 1)
    assert len(big) > admission.INLINE_READ_BYTES
    expected = OVERHEAD_BYTES + FOOTPRINT_FACTOR * (16384 + 16) * 4
    assert estimate_device_bytes(_req(big)) == expected


def test_a_refused_source_is_remembered_and_not_read_again(monkeypatch):
    """A large source the parser cannot take (50,000 unary minus: the parser's MemoryError) is
    refused from the child; asked again with no Python to start a child, the same refusal comes from
    what admission remembers."""
    bad = "x = " + "-" * 50_000 + "1\n" + REF
    with pytest.raises(Unreadable):
        estimate_device_bytes(_req(bad))
    monkeypatch.setattr(admission.sys, "executable", "/nonexistent/python")
    with pytest.raises(Unreadable):
        estimate_device_bytes(_req(bad))


def test_a_client_holds_at_most_its_readers(monkeypatch):
    """With alice's one reading child taken, her next large source is ReadersBusy (a 429), and bob's
    is read; with READERS taken in all, bob waits too."""
    big = REF + "\n# alice\n" + "pad = 0\n" * (admission.INLINE_READ_BYTES // 8 + 1)
    monkeypatch.setitem(admission._readers, "alice", admission.READERS_PER_CLIENT)
    with pytest.raises(admission.ReadersBusy):
        estimate_device_bytes(_req(big), client="alice")
    assert estimate_device_bytes(_req(big), client="bob") > OVERHEAD_BYTES
    monkeypatch.setitem(admission._readers, "carol", admission.READERS - admission.READERS_PER_CLIENT)
    with pytest.raises(admission.ReadersBusy):
        estimate_device_bytes(_req(big.replace("# alice", "# bob")), client="bob")
