"""The timed calls' inputs drawn before the exclusive timed region (`TimedDraws.ahead`): the same
tensors in the same order as a draw at each call, the generators as that draw leaves them, the
byte budget kept, and nothing of a later call reachable from a call's arguments."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import types
import weakref
from typing import Any

import pytest
import torch

from drkernel.gym.config import TIMED_PREDRAW_ENV, EvalConfig
from drkernel.gym.harness import inputs as harness
from drkernel.gym.harness.timing import ahead_calls, timing_options
from drkernel.gym.seeds import Distribution, plan_seeds, with_distribution

CPU = torch.device("cpu")
# 4x8 float32 (128 bytes) + 8 int64 (64 bytes) + a scalar: 192 bytes a draw
REFERENCE = types.SimpleNamespace(get_inputs=lambda: [torch.randn(4, 8), torch.randint(0, 9, (8,)), 3])
DRAW_BYTES = 192


def _sequence(draws: harness.TimedDraws, calls: int) -> list[tuple[list[Any], torch.Tensor]]:
    """Each call's inputs and what a solution drawing random numbers in its call gets."""
    return [(draws(i), torch.rand(3)) for i in range(calls)]


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(
        torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y for x, y in zip(a, b))


@pytest.mark.parametrize("dist", [Distribution.PLAIN, Distribution.WIDE, Distribution.HEAVY])
def test_drawn_ahead_equals_drawn_at_each_call(dist):
    seed = with_distribution(plan_seeds(7, 3, second=False).timing, dist)
    torch.manual_seed(1)
    at_call = _sequence(harness.TimedDraws(REFERENCE, seed, CPU), 8)
    torch.manual_seed(1)
    ahead = harness.TimedDraws(REFERENCE, seed, CPU)
    before = torch.get_rng_state()
    assert ahead.ahead(5, 1 << 20) == 5 and ahead.held() == [0, 1, 2, 3, 4]
    assert torch.equal(torch.get_rng_state(), before)  # drawing ahead leaves the generators alone
    got = _sequence(ahead, 8)  # calls 5..7 are drawn at their call
    for (a, ra), (b, rb) in zip(at_call, got):
        assert _same(a, b)
        # the solution's own random numbers: noise after every harness draw, ahead or not (the state a
        # seeded draw leaves would tell the seed: `harness.scrub_generators`)
        assert not torch.equal(ra, rb)
    assert not _same(at_call[0][0], at_call[1][0])  # each call its own draw


def test_the_budget_bounds_the_draws_ahead_and_the_rest_are_drawn_at_their_call():
    seed = plan_seeds(3, 3, second=False).timing
    draws = harness.TimedDraws(REFERENCE, seed, CPU)
    assert draws.ahead(10, int(2.5 * DRAW_BYTES)) == 2 and draws.held() == [0, 1]
    fresh = harness.TimedDraws(REFERENCE, seed, CPU)
    assert all(_same(draws(i), fresh(i)) for i in range(4))
    assert harness.TimedDraws(REFERENCE, seed, CPU).ahead(10, DRAW_BYTES - 1) == 0
    assert harness.TimedDraws(REFERENCE, seed, CPU).ahead(10, 10 * DRAW_BYTES) == 10


def test_a_call_reaches_no_later_draw_and_its_inputs_are_not_kept():
    draws = harness.TimedDraws(REFERENCE, plan_seeds(5, 3, second=False).timing, CPU)
    draws.ahead(4, 1 << 20)
    args = draws(0)
    assert draws.held() == [1, 2, 3]
    held = [draws._ahead[i][0] for i in draws.held()]  # the harness's own store of later draws
    later = {id(x) for values in held for x in [values, *values] if isinstance(x, (list, torch.Tensor))}
    later |= {id(draws), id(draws._ahead)}
    assert not later & _reachable(args)
    alive = weakref.ref(args[0])
    del args
    gc.collect()
    assert alive() is None  # handed over, then dropped: memory goes with the call
    draws.clear()
    assert draws.held() == []


def _reachable(root: Any) -> set[int]:
    """Ids of the containers and tensors reachable from ``root`` (types, modules, functions not walked)."""
    seen, stack = set(), [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType, types.FunctionType)):
            continue
        seen.add(id(obj))
        stack.extend(gc.get_referents(obj))
    return seen


def test_out_of_memory_while_drawing_ahead_holds_none():
    seen = {"n": 0}

    def get_inputs():
        seen["n"] += 1
        if seen["n"] == 3:
            raise torch.cuda.OutOfMemoryError("no room")
        return [torch.randn(4)]

    reference = types.SimpleNamespace(get_inputs=get_inputs)
    draws = harness.TimedDraws(reference, 11, CPU)
    before = torch.get_rng_state()
    assert draws.ahead(5, 1 << 20) == 0 and draws.held() == []
    assert torch.equal(torch.get_rng_state(), before)
    assert _same(draws(0), harness.TimedDraws(reference, 11, CPU)(0))


def _options(**changes: Any) -> dict[str, Any]:
    return timing_options(EvalConfig(**changes).to_dict())


def test_ahead_calls():
    opts = _options
    assert ahead_calls(100, opts()) == 20  # adaptive, blocks of 10: two blocks
    assert ahead_calls(40, opts(timed_calls=40, timed_calls_min=30)) == 40  # two blocks pass the calls
    assert ahead_calls(100, opts(timing_rule="fixed")) == 100
    assert ahead_calls(100, opts(timing_rule="fixed", timed_calls_max=150)) == 150


def test_the_switch_is_a_config_field_off_unless_the_environment_turns_it_on():
    assert EvalConfig.from_dict({"timed_predraw": True}).timed_predraw is True
    assert "timed_predraw" in EvalConfig().to_dict()  # it reaches the candidate's job
    code = "from drkernel.gym.config import EvalConfig; print(EvalConfig().timed_predraw)"
    for value, expected in (("0", "False"), ("1", "True"), (None, "False")):
        env = {k: v for k, v in os.environ.items() if k != TIMED_PREDRAW_ENV}
        env.update({TIMED_PREDRAW_ENV: value} if value is not None else {})
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected
