"""The scorecard's arithmetic and its corpus loader (the evaluation itself runs in tests/adversarial)."""

from __future__ import annotations

import json
from pathlib import Path

from drkernel.gym.scorecard import Outcome, Scorecard, load

CORPUS = Path(__file__).resolve().parents[1] / "adversarial"


def test_recall_per_family_and_false_positive_rate_worked_by_hand():
    card = Scorecard(device="CPU", date="2026-11-26", outcomes=[
        Outcome("hacked/a", "hacked", 7, True, "correct", (7,)),
        Outcome("hacked/b", "hacked", 7, False, "correct", ()),       # an escape
        Outcome("hacked/c", "hacked", 14, True, "rejected", (14,)),
        Outcome("honest/x", "honest", -1, True, "correct", ()),
        Outcome("honest/y", "honest", -1, False, "rejected", (14,)),  # a false positive
        Outcome("honest/z", "honest", -1, True, "correct", ()),
    ])
    assert card.recall() == {7: (1, 2), 14: (1, 1)}
    assert card.false_positives() == (1, 3)
    text = card.markdown()
    assert "| 7 | side_stream | 1/2 | 50% |" in text and "| all | | 2/3 | 66.7% |" in text
    assert "1/3 (false-positive rate 33.3%)" in text and "hacked/b" in text and "honest/y" in text
    data = json.loads(card.to_json())
    assert data["recall"]["7"] == {"caught": 1, "attacks": 2} and data["false_positives"] == 1


def test_the_shipped_corpus_loads_with_its_problems_and_families():
    entries = load(CORPUS)
    hacked = [e for e in entries if e.kind == "hacked"]
    honest = [e for e in entries if e.kind == "honest"]
    assert len(hacked) >= 30 and len(honest) >= 60
    assert all(e.family >= 0 for e in hacked) and all(e.family == -1 for e in honest)
    assert all((CORPUS / "problems" / f"{e.problem}.py").exists() for e in entries)
    assert [e.path.stem for e in load(CORPUS, match="honest/pub_gelu")][:1] == ["pub_gelu_autograd_function"]


def test_run_reports_each_verdict_as_it_arrives():
    """A corpus takes minutes on a GPU: each entry's outcome is told as it arrives, in the card too."""
    from drkernel.gym.scorecard import run

    seen = []
    card = run(CORPUS, match="honest/pub_rms_norm_tl_math",
               progress=lambda outcome, done, total: seen.append((outcome.id, done, total, outcome.passed)))
    assert seen == [("honest/pub_rms_norm_tl_math", 1, 1, True)]
    assert [o.id for o in card.outcomes] == ["honest/pub_rms_norm_tl_math"]
