"""The trust boundary: a solution cannot see or change the judge's tensors, cannot influence the
inputs it is checked on, and is caught when it changes its own inputs."""

from __future__ import annotations

from drkernel.gym import Status
from gym_cases import RELU_SOLUTION, request

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
