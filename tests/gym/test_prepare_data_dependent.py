"""Preparing a problem whose ``get_inputs`` reads values (``int(offsets[-1])`` cannot run on the meta
device): CPU sizing measures it on a capped host draw (problems/scaling.py `measure`) and the judge
sizes its inputs on the device (gym/judge/main.py `Judge.input_bytes`), so the evaluation gives a
verdict, never a JudgeError on 'prepare'. Problem and solution: ``reproducers/jagged_item_*``."""

from __future__ import annotations

from pathlib import Path

import torch

from drkernel.gym import EvalConfig, EvalRequest, Status
from drkernel.gym.harness import inputs as harness
from drkernel.gym.judge.main import Judge
from drkernel.gym.messages import Prepare
from drkernel.problems.problem import Problem

HERE = Path(__file__).parent / "reproducers"
JAGGED = Problem(name="jagged_item", level=1, code=(HERE / "jagged_item_problem.py").read_text(), source="file")


def test_the_judge_prepares_a_value_reading_problem_on_cpu():
    prepared = Judge(None, torch.device("cpu")).prepare(Prepare(JAGGED.to_dict(), True, 1 << 18, True, 42))
    assert prepared.code == JAGGED.code  # 8 x 32 x 64 values at most: within the budget, not scaled
    drawn = harness.draw_inputs(harness.load_reference(JAGGED.code), 42, torch.device("cpu"))
    assert prepared.input_bytes == harness.tensor_bytes(drawn)  # the very draw a trial of seed 42 sees


def test_the_jagged_reproducer_gets_a_verdict(evaluator):
    request = EvalRequest(JAGGED, (HERE / "jagged_item_solution.py").read_text(), EvalConfig(device="cpu", trials=3))
    r = evaluator.evaluate(request)
    assert r.status is Status.CORRECT, (r.status, r.error)
    # its trials' inputs differ in shape: the recall run refills the same objects resized, no false hack
    assert r.valid and not [h for h in r.hacks if not h.strict_only], [(h.code, h.evidence) for h in r.hacks]
