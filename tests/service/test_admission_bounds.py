"""Admission folds a problem's module constants in the HTTP server's process: its sizes are bounded
(a tuple constant of at most `MAX_STATIC_TUPLE` values, `MAX_FOLD_WORK` values folded in all), so
starred tuples (``A1 = (*A0, *A0, ...)``) cannot grow the server, and code that asks more than the
work bound is refused as the client's (`Unreadable`, a 422)."""

from __future__ import annotations

import resource

import pytest

from drkernel.gym.config import EvalConfig, EvalRequest
from drkernel.problems.problem import Problem
from drkernel.service.admission import (FOOTPRINT_FACTOR, MAX_FOLD_WORK, MAX_STATIC_TUPLE, OVERHEAD_BYTES,
                                        Unreadable, estimate_device_bytes)

TAIL = ("import torch\n"
        "def get_inputs():\n    return [torch.randn(*S)]\n"
        "def get_init_inputs():\n    return []\n")


def _estimate(code: str) -> int:
    return estimate_device_bytes(EvalRequest(Problem(name="t", level=1, code=code), "", EvalConfig(device="cuda")))


def _bomb(stars: int, levels: int) -> str:
    lines = ["A0 = (" + "1," * 8 + ")"]
    lines += [f"A{k} = (" + ",".join([f"*A{k - 1}"] * stars) + ",)" for k in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_a_starred_tuple_within_the_bound_is_a_shape_and_past_it_unknown():
    # S = (*A, *A) with A = (4, 8): the shape (4, 8, 4, 8), 1024 elements of fp32.
    assert _estimate("A = (4, 8)\nS = (*A, *A)\n" + TAIL) == OVERHEAD_BYTES + FOOTPRINT_FACTOR * 1024 * 4
    # 65 dimensions: not a shape admission reads, so S is unknown (0 elements: the overhead alone).
    ones = ",".join(["1"] * (MAX_STATIC_TUPLE + 1))
    assert _estimate(f"S = ({ones})\n" + TAIL) == OVERHEAD_BYTES


def test_the_549_byte_tuple_bomb_folds_in_bounded_memory():
    # 8 * 20**6 = 5e8 elements unbounded (several GiB); bounded, A1 is already past 64 and unknown.
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert _estimate(_bomb(stars=20, levels=6) + "S = A6\n" + TAIL) == OVERHEAD_BYTES
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 << 10  # KiB: under 64 MiB


def test_constants_that_take_more_than_the_work_bound_are_unreadable():
    # Each line copies 8 values of A0 eight times (64 values, within a shape): the lines together
    # ask more than MAX_FOLD_WORK.
    lines = "".join(f"B{i} = (" + "*A0," * 8 + ")\n" for i in range(MAX_FOLD_WORK // 64 + 1))
    with pytest.raises(Unreadable, match="module constants"):
        _estimate(_bomb(stars=1, levels=0) + lines + "S = (4,)\n" + TAIL)


def test_an_unscaled_cpu_request_past_the_cpu_bound_is_refused_and_a_small_one_priced():
    from drkernel.service.admission import MAX_UNSCALED_CPU_ELEMENTS, TooLargeForCpu

    # S = (2048, 4096): 2**23 elements, past 2**22; scaled (the default) it is priced at its CPU budget.
    big = Problem(name="t", level=1, code="S = (2048, 4096)\n" + TAIL)
    assert 2048 * 4096 > MAX_UNSCALED_CPU_ELEMENTS
    with pytest.raises(TooLargeForCpu, match="cpu_scale"):
        estimate_device_bytes(EvalRequest(big, "", EvalConfig(device="cpu", cpu_scale=False)))
    assert estimate_device_bytes(EvalRequest(big, "", EvalConfig(device="cpu"))) == (
        OVERHEAD_BYTES + FOOTPRINT_FACTOR * EvalConfig().cpu_element_budget * 4)
    # On a GPU the full size is the problem's own: priced, never refused.
    assert estimate_device_bytes(EvalRequest(big, "", EvalConfig(device="cuda", cpu_scale=False))) == (
        OVERHEAD_BYTES + FOOTPRINT_FACTOR * 2048 * 4096 * 4)
    small = Problem(name="t", level=1, code="S = (64, 64)\n" + TAIL)
    assert estimate_device_bytes(EvalRequest(small, "", EvalConfig(device="cpu", cpu_scale=False))) == (
        OVERHEAD_BYTES + FOOTPRINT_FACTOR * 64 * 64 * 4)


def test_a_body_s_token_bound_read_from_its_bytes_is_never_below_its_count():
    """`body_reader.upper_bound` (separators and openings in the bytes) decides which bodies the server
    parses without counting them: it must never be below the real count of values and keys."""
    import json
    import random

    from drkernel.service.body_reader import count_tokens, upper_bound

    rng = random.Random(0)

    def value(depth: int):
        kind = rng.randrange(6 if depth < 4 else 3)
        if kind == 0:
            return rng.randrange(-5, 5)
        if kind == 1:
            return "".join(rng.choice('ab,[{":}] ') for _ in range(rng.randrange(6)))
        if kind == 2:
            return rng.choice([None, True, 1.5])
        if kind in (3, 4):
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {f"k{i}": value(depth + 1) for i in range(rng.randrange(4))}

    for _ in range(500):
        doc = value(0)
        for text in (json.dumps(doc), json.dumps(doc, separators=(",", ":"))):
            assert upper_bound(text.encode()) >= count_tokens(json.loads(text))
    assert count_tokens({"a": [1, 2, {"b": None}]}) == 1 + 1 + 1 + 2 + 1 + 1 + 1
