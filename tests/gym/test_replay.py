"""Replay under the Triton interpreter: a result read back from its file is evaluated again and
agrees; a changed provenance field and a changed verdict are named. Speedup agreement by hand."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from drkernel.gym.replay import agreement, load, record_json, replay, speedups_agree, verdict_class
from drkernel.gym.result import EvalResult, Status
from gym_cases import RELU_SOLUTION, request


def test_a_replayed_result_agrees_and_a_changed_field_is_named(evaluator, tmp_path):
    req = request(RELU_SOLUTION)
    original = evaluator.evaluate(req)
    assert original.provenance.problem_hash == req.problem.code_hash and original.provenance.seeds["trials"]
    path = tmp_path / "result.json"
    path.write_text(json.dumps(record_json(req, original)))
    (rec,) = load(path)
    assert rec.request == req and rec.result == original

    (same,) = asyncio.run(replay([rec], evaluator))
    assert same.agrees and same.original == same.replayed == "valid" and same.provenance == ()

    flags = {**original.provenance.reference_flags, "cuda.matmul.allow_tf32": True}
    changed = replace(rec, result=replace(original, provenance=replace(original.provenance, reference_flags=flags)))
    (named,) = asyncio.run(replay([changed], evaluator))
    assert named.agrees  # the verdict still agrees; the field is named
    assert named.provenance == ("reference_flags.cuda.matmul.allow_tf32: True -> False",)


def test_a_different_verdict_disagrees():
    valid = EvalResult(status=Status.CORRECT).finalize()
    wrong = EvalResult(status=Status.INCORRECT).finalize()
    a = agreement("k", valid, wrong)
    assert (a.original, a.replayed, a.agrees) == ("valid", "incorrect", False)
    assert verdict_class(EvalResult(status=Status.TIMEOUT).finalize()) == "timeout"


def test_speedups_agree_when_the_intervals_overlap():
    def timed(s, ci):
        return EvalResult(status=Status.CORRECT, speedup=s, speedup_ci=ci).finalize()

    assert speedups_agree(timed(1.5, (1.4, 1.6)), timed(1.65, (1.58, 1.7)))     # 1.58 <= 1.6
    assert not speedups_agree(timed(1.5, (1.4, 1.6)), timed(1.8, (1.7, 1.9)))
    assert speedups_agree(timed(1.5, None), timed(None, None)) is None
    assert agreement("k", timed(1.5, (1.4, 1.6)), timed(1.8, (1.7, 1.9))).agrees is False
