"""The trust boundary: a solution cannot see or change the judge's tensors, cannot influence the
inputs it is checked on, and is caught when it changes its own inputs."""

from __future__ import annotations

import re
import threading
import uuid

import pytest

from drkernel.errors import JudgeError
from drkernel.gym import Status
from drkernel.gym.orchestrator.own_judge import mark_request_reference
from drkernel.problems.problem import Problem
from gym_cases import RELU_REFERENCE, RELU_SOLUTION, request

FORWARD = "        y = torch.empty_like(x)\n"


def with_forward_prefix(code: str) -> str:
    return RELU_SOLUTION.replace(FORWARD, code + FORWARD)


def test_no_reference_tensor_is_reachable_from_the_solution(evaluator, boundary_only_evaluator):
    # Look through every live object for the reference's output (relu of the input): the judge
    # holds it in another process, so the search finds nothing and the solution returns zeros.
    # With the default checks the gc search itself is a hack (14), rejected before it runs.
    hunt = (
        "        import gc\n"
        "        found = [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and o.shape == x.shape\n"
        "                 and o.data_ptr() != x.data_ptr() and torch.equal(o, torch.relu(x))]\n"
        "        if found:\n"
        "            return found[0].clone()\n"
        "        return torch.zeros_like(x)\n")
    r = boundary_only_evaluator.evaluate(request(with_forward_prefix(hunt)))
    assert r.status is Status.INCORRECT
    r = evaluator.evaluate(request(with_forward_prefix(hunt)))
    assert r.status is Status.REJECTED and 14 in [h.code for h in r.hacks]


def test_uninitialised_output_cannot_land_on_a_reference_result(evaluator):
    # Result reuse (hack 5): the reference never ran in this process, so empty memory holds no answer.
    r = evaluator.evaluate(request(with_forward_prefix("        torch.relu(x)\n        return torch.empty_like(x)\n")))
    assert r.status is Status.INCORRECT


def test_patching_the_input_generator_at_import_does_not_change_the_inputs(evaluator, boundary_only_evaluator):
    # Inputs are drawn before the solution is imported: patching torch.randn to give zeros (and
    # then returning zeros) does not make the judge's check pass.
    src = RELU_SOLUTION.replace("class ModelNew", "torch.randn = lambda *s, **k: torch.zeros(*s)\n\n\nclass ModelNew")
    src = src.replace(FORWARD, "        return torch.zeros_like(x)\n" + FORWARD)
    r = boundary_only_evaluator.evaluate(request(src))
    assert r.status is Status.INCORRECT
    r = evaluator.evaluate(request(src))  # by default the patch itself is hack 8
    assert r.status is Status.REJECTED and 8 in [h.code for h in r.hacks]


def test_input_mutation_is_seen_by_the_judge_and_reported_as_hack_6(evaluator):
    r = evaluator.evaluate(request(RELU_SOLUTION.replace("return y", "x.zero_()\n        return y")))
    assert r.status is Status.CORRECT  # the outputs were right ...
    assert [h.code for h in r.hacks] == [6] and "input[0]" in r.hacks[0].evidence
    assert r.valid is False and r.valid_lenient is False  # ... but the verdict is not valid


def test_mutating_inputs_in_one_trial_does_not_leak_into_the_judges_next_trial(evaluator):
    # If the judge shared memory with the candidate, trial 1 would see the zeroed inputs of trial 0.
    src = RELU_SOLUTION.replace("return y", "x.fill_(float('nan'))\n        return y")
    r = evaluator.evaluate(request(src, trials=3))
    assert r.status is Status.CORRECT and [t.max_abs_err for t in r.trials] == [0.0, 0.0, 0.0]


def test_printing_to_stdout_does_not_break_the_protocol(evaluator):
    src = RELU_SOLUTION.replace("class ModelNew", "print('x' * 100000)\n\n\nclass ModelNew")
    assert evaluator.evaluate(request(src)).status is Status.CORRECT


# -- a reference that came with the request runs in a judge of its own ---------------------------

WRONG_SOLUTION = RELU_SOLUTION.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)")

REBIND = RELU_REFERENCE + '''
import sys
_judge = sys.modules.get("drkernel.gym.judge.main")
if _judge is not None:  # in a judge: every comparison from now on compares the reference with itself
    _compare = _judge.compare_outputs
    _judge.compare_outputs = lambda out, ref, *a, **k: _compare(ref, ref, *a, **k)
'''

HUNT = RELU_REFERENCE + '''
import gc
_marker = "SEC" + "RET-"  # never written whole here, so this source does not match itself


def _strings(o):  # strings are not tracked by gc: look into the containers that hold them
    items = [x for kv in o.items() for x in kv] if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()
    return [x for x in items if isinstance(x, str)]


_seen = sorted({s[s.index(_marker):][:40] for o in gc.get_objects() for s in _strings(o)
                if _marker in s and s != _marker})
if _seen:
    raise RuntimeError("found " + repr(_seen))
'''


def request_reference(code: str, name: str) -> Problem:
    """A problem whose reference came with the request (as the service's intake marks it)."""
    return Problem(name=name, level=1, code=code, problem_id=name, source="request",
                   metadata=mark_request_reference({}))


def test_a_request_reference_that_rebinds_the_comparison_changes_only_its_own_evaluation(evaluator):
    # The rebinding works where it runs (its own evaluation passes a wrong solution), and the next
    # evaluation of a wrong solution against the server's problem is still judged by an intact judge.
    own = evaluator.evaluate(request(WRONG_SOLUTION, problem=request_reference(REBIND, "relu_rebind")))
    assert own.status is Status.CORRECT  # the attack is real: its own judge was rebound
    assert evaluator.evaluate(request(WRONG_SOLUTION)).status is Status.INCORRECT
    again = evaluator.evaluate(request(WRONG_SOLUTION, problem=request_reference(RELU_REFERENCE, "relu_plain")))
    assert again.status is Status.INCORRECT


def test_a_full_size_reference_on_cpu_runs_in_a_judge_of_its_own(evaluator):
    # cpu_scale=False asks for the reference at full size: seconds a trial in the interpreter's judge,
    # so it gets a judge of its own (hostile round 10: in the shared one, every other client's
    # comparisons waited behind it). Seen through a reference that rebinds its judge's comparison: the
    # rebinding stays in that evaluation, a later one in the shared judge is intact.
    problem = Problem(name="relu_rebind_unscaled", level=1, code=REBIND, source="test")
    own = evaluator.evaluate(request(WRONG_SOLUTION, problem=problem, cpu_scale=False))
    assert own.status is Status.CORRECT  # its own judge was rebound
    assert evaluator.evaluate(request(WRONG_SOLUTION)).status is Status.INCORRECT


def test_a_request_reference_cannot_read_another_reference_from_judge_memory(evaluator):
    # One client's reference carries a secret; another's searches every string of its process for it.
    secret = f"# SECRET-{uuid.uuid4().hex}\n"
    first = evaluator.evaluate(request(RELU_SOLUTION, problem=request_reference(RELU_REFERENCE + secret, "relu_a")))
    assert first.status is Status.CORRECT
    hunter = evaluator.evaluate(request(RELU_SOLUTION, problem=request_reference(HUNT, "relu_hunt")))
    assert hunter.status is Status.CORRECT, hunter.error  # it found nothing (else it raises with what it found)


def test_a_request_reference_that_hogs_memory_fails_alone(evaluator):
    hog = RELU_REFERENCE + "import time\n_hog = b'x' * (1 << 30)\ntime.sleep(600)\n"
    with pytest.raises(JudgeError, match="memory limit"):
        evaluator.evaluate(request(RELU_SOLUTION, problem=request_reference(hog, "relu_hog"), rss_limit_mb=512,
                                   timeout_s=120))
    assert evaluator.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT


def test_a_request_reference_that_hangs_holds_up_no_other_evaluation(evaluator):
    # The hanging reference's evaluation is bounded by its own timeout and ends as the reference's
    # failure; the server's problem is evaluated meanwhile (with a shared judge it waited behind it).
    hang = RELU_REFERENCE + "import time\ntime.sleep(3600)\n"
    failed: list[BaseException] = []

    def hung() -> None:
        try:
            evaluator.evaluate(request(RELU_SOLUTION, problem=request_reference(hang, "relu_hang"), timeout_s=45))
        except JudgeError as e:
            failed.append(e)

    thread = threading.Thread(target=hung)
    thread.start()
    assert evaluator.evaluate(request(RELU_SOLUTION)).status is Status.CORRECT
    assert thread.is_alive()  # the other evaluation did not wait for it
    thread.join()
    assert len(failed) == 1 and "did not answer within 45 s" in str(failed[0])


def test_exported_outputs_count_against_the_candidates_memory_limit(boundary_only_evaluator):
    # 800 MB of output of the wrong shape (the reference returns 8 x 96): declared larger than what
    # the candidate's limit leaves (its resident size and a copy each for the orchestrator and the
    # judge), it is refused from its header, before this process or the judge reads a byte of it.
    huge = "        return torch.ones(200_000_000)\n"
    r = boundary_only_evaluator.evaluate(request(with_forward_prefix(huge), rss_limit_mb=2560))
    assert r.status is Status.CRASHED and re.search(r"blob of 800\d{6} bytes \(at most \d+ here\)", r.error or "")
