"""Fast@p, best-by-turn and rates against values worked out by hand."""

import pytest

from drkernel.bench.metrics import SampleRecord, summarize
from drkernel.reward import Outcome, TurnScore


def ok(speedup, lazy=False):
    return TurnScore(correct=True, speedup=speedup, lazy=lazy, outcome=Outcome.CORRECT)


BAD = TurnScore(outcome=Outcome.COMPILE_ERROR)
HACK = TurnScore(correct=True, hacked=True, speedup=10.0, outcome=Outcome.HACKED)

# 4 samples, 2 problems (levels 1 and 2), 3 turns; sample D stopped after turn 1 (carried forward)
SAMPLES = [
    SampleRecord("p1", 1, (BAD, ok(0.8), ok(1.3))),  # A
    SampleRecord("p1", 1, (ok(2.5), BAD, ok(1.1))),  # B
    SampleRecord("p2", 2, (HACK, HACK, ok(3.2, lazy=True))),  # C
    SampleRecord("p2", 2, (ok(1.0),)),  # D
]


def test_per_turn_fast_at_p():
    m = summarize(SAMPLES)
    t1, t2, t3 = m["per_turn"]
    # turn 1 valid: B (2.5), D (1.0)            -> fast@0 = 2/4, fast@1 = 2/4, fast@1.2 = 1/4, fast@3 = 0
    assert (t1["fast@0"], t1["fast@1"], t1["fast@1.2"], t1["fast@2"], t1["fast@3"]) == (
        0.5,
        0.5,
        0.25,
        0.25,
        0.0,
    )
    # turn 2 valid: A (0.8), D carried (1.0)    -> fast@0 = 2/4, fast@1 = 1/4, fast@1.2 = 0
    assert (t2["fast@0"], t2["fast@1"], t2["fast@1.2"]) == (0.5, 0.25, 0.0)
    # turn 3 valid: A 1.3, B 1.1, C 3.2, D 1.0  -> fast@0 = 1, fast@1.2 = 2/4, fast@1.5 = 1/4, fast@3 = 1/4
    assert (t3["fast@0"], t3["fast@1.2"], t3["fast@1.5"], t3["fast@3"]) == (1.0, 0.5, 0.25, 0.25)
    # hack rate: turn 1 and 2 have C hacked (1/4); lazy only at turn 3 (C)
    assert (t1["hacked"], t2["hacked"], t3["hacked"]) == (0.25, 0.25, 0.0)
    assert (t1["lazy"], t3["lazy"]) == (0.0, 0.25)
    # correctness counts hacked-but-correct outputs: turn 1 = B, C, D
    assert t1["correct"] == 0.75 and t1["valid"] == 0.5
    assert t1["outcomes"] == {"compile_error": 1, "correct": 2, "hacked": 1}


def test_best_by_turn():
    b1, b2, b3 = summarize(SAMPLES)["best_by_turn"]
    # best so far: t1 A -, B 2.5, C -, D 1.0 ; t2 A 0.8 ; t3 A 1.3, C 3.2
    assert (b1["fast@0"], b1["fast@1.2"], b1["fast@2"]) == (0.5, 0.25, 0.25)
    assert (b2["fast@0"], b2["fast@1"], b2["fast@1.2"]) == (0.75, 0.5, 0.25)
    assert (b3["fast@0"], b3["fast@1.2"], b3["fast@1.5"], b3["fast@3"]) == (1.0, 0.75, 0.5, 0.25)


def test_per_level_breakdown():
    levels = summarize(SAMPLES)["levels"]
    assert set(levels) == {"1", "2"}
    # level 2 at turn 3: C 3.2 valid, D 1.0 -> fast@1.5 = 1/2
    assert levels["2"]["per_turn"][2]["fast@1.5"] == 0.5
    assert levels["1"]["best_by_turn"][0]["fast@2"] == 0.5


def test_without_timing_fast_above_zero_is_not_measured():
    untimed = [SampleRecord("p", 1, (ok(None), BAD)), SampleRecord("p", 1, (BAD, BAD))]
    m = summarize(untimed)
    assert m["timed"] is False
    t1 = m["per_turn"][0]
    assert t1["fast@0"] == 0.5 and t1["fast@1"] is None and t1["fast@3"] is None
    assert m["best_by_turn"][1]["fast@0"] == 0.5 and m["best_by_turn"][1]["fast@1.2"] is None


def test_empty_run_has_no_turns():
    m = summarize([])
    assert m["samples"] == 0 and m["per_turn"] == [] and m["timed"] is False


@pytest.mark.parametrize("p,expected", [(0.0, 1.0), (1.0, 0.5), (2.0, 0.0)])
def test_vectorised_table_matches_a_loop(p, expected):
    samples = [SampleRecord("p", 1, (ok(1.5),)), SampleRecord("p", 1, (ok(0.5),))]
    loop = sum(1 for s in samples for t in s.turns[:1] if t.valid and (p == 0 or t.speedup >= p)) / len(
        samples
    )
    assert summarize(samples)["per_turn"][0][f"fast@{p:g}"] == loop == expected
