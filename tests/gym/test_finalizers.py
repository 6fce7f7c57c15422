"""No finaliser of the solution's runs between a judged call and its export (`harness.inputs.collector_held`).

Red team 19 (a01): ``forward`` launched one trivial own kernel and left an unreachable cycle whose
``__del__`` computed the GELU with PyTorch into the output; it primed the collector so that the
harness's own bookkeeping after the call (the dispatcher watch's events turned into tuples, after
every observer had closed) crossed the threshold, and the output was exported with the answer in it:
correct, valid and strict-valid at op coverage 1.0, the reward of an honest kernel. With automatic
collection held from the call to the export, the cycle waits until the output has been judged, so the
output is the empty one the kernel left."""

from __future__ import annotations

import gc
from pathlib import Path

from drkernel.gym import EvalConfig, EvalRequest
from drkernel.gym.harness.inputs import collector_held
from drkernel.problems import resolve_problem

ATTACK = (Path(__file__).parent / "reproducers" / "gc_finalizer_gelu.py").read_text()


def test_a_finaliser_primed_to_run_after_the_call_does_not_reach_the_judged_output(evaluator):
    result = evaluator.evaluate(EvalRequest(problem=resolve_problem("builtin/L1/gelu"), solution=ATTACK,
                                            config=EvalConfig(device="cpu")))
    assert not result.valid and not result.valid_strict, result.error
    assert result.status.value == "incorrect", (result.status, result.error)


def test_the_collector_is_held_inside_and_restored_after():
    """Inside, allocations past every threshold collect nothing; outside, the state before returns."""
    collected: list[int] = []

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            collected.append(1)

    assert gc.isenabled()
    with collector_held():
        Cycle()
        junk = [[] for _ in range(50_000)]  # far past the youngest generation's threshold
        assert not gc.isenabled() and not collected
    del junk
    assert gc.isenabled()
    gc.collect()
    assert collected == [1]
