"""The orchestrator's seed plan (secret per evaluation, reproducible with an explicit seed) and the
input distributions it encodes in trial seeds."""

from __future__ import annotations

import types
from dataclasses import asdict, replace

import pytest
import torch

from drkernel.gym.harness import inputs as harness
from drkernel.gym.harness.perturb import pair_count
from drkernel.gym.seeds import (INTEGRITY_RUNS, PUBLIC_SEED, Distribution, SeedPlan, across_rows,
                                distribution_of, perturbation_of, perturbed, plan_seeds, replayed_plan, timed_step,
                                torch_seed, with_across, with_distribution)


def test_secret_plans_differ_and_never_count_up_from_a_base():
    a, b = plan_seeds(None, 5, second=True), plan_seeds(None, 5, second=True)
    assert a.trials != b.trials and a.timing != b.timing and a.coverage != b.coverage
    seeds = [torch_seed(s) for s in a.trials] + [a.timing, a.coverage]
    assert a.weight == b.weight == PUBLIC_SEED  # the solution holds its weights anyway: judge models stay cached
    assert len(set(seeds)) == len(seeds)
    assert all(abs(x - y) > 1000 for x, y in zip(seeds, seeds[1:]))  # not seed + k
    assert a.reference == b.reference == PUBLIC_SEED  # the reference-timing cache key stays stable
    assert sorted(a.integrity_order) == sorted(INTEGRITY_RUNS) and len(a.decoys) == len(INTEGRITY_RUNS)


def test_an_explicit_seed_gives_the_same_plan_every_time():
    assert plan_seeds(7, 3, second=False) == plan_seeds(7, 3, second=False)
    assert plan_seeds(7, 3, second=False) != plan_seeds(8, 3, second=False)
    assert plan_seeds(7, 3, second=False).reference == 7


@pytest.mark.parametrize("trials,varied", [(1, 0), (2, 1), (3, 2), (5, 4)])
def test_varied_trials_are_never_trial_zero_or_the_second_size(trials, varied):
    for _ in range(20):
        plan = plan_seeds(None, trials, second=True)
        dists = [distribution_of(s) for s in plan.trials]
        assert dists[0] is Distribution.PLAIN and dists[-1] is Distribution.PLAIN
        assert len(dists[:trials]) - dists[:trials].count(Distribution.PLAIN) == varied
        if trials >= 3:
            assert {Distribution.WIDE, Distribution.SHIFTED} <= set(dists)
        assert len(set(dists[1:trials])) == trials - 1  # distinct while the variants last


def test_a_plan_draws_only_the_distributions_the_reference_is_defined_on():
    allowed = [int(Distribution.PLAIN), int(Distribution.TINY), int(Distribution.SIGNED)]
    for _ in range(20):
        plan = plan_seeds(None, 7, second=False, allowed=allowed)
        dists = [distribution_of(s) for s in plan.trials]
        assert dists[0] is Distribution.PLAIN and set(dists[1:]) == {Distribution.TINY, Distribution.SIGNED}
        assert {distribution_of(plan.timing), distribution_of(plan.coverage)} <= set(map(Distribution, allowed))
    plan = plan_seeds(None, 4, second=False, allowed=[])
    assert {distribution_of(s) for s in (*plan.trials, plan.timing, plan.coverage)} == {Distribution.PLAIN}


def test_timed_calls_and_coverage_draw_a_secret_distribution_plain_included():
    seen = {(distribution_of(p.timing), distribution_of(p.coverage)) for p in
            (plan_seeds(None, 3, second=False) for _ in range(300))}
    timing, coverage = {t for t, _ in seen}, {c for _, c in seen}
    assert timing == coverage == set(Distribution)  # 7 outcomes, 300 draws: each seen (miss odds ~1e-19)
    plan = plan_seeds(None, 3, second=False)
    assert distribution_of(plan.reference_timing) is distribution_of(plan.timing)  # the reference timed alike
    assert torch_seed(plan.reference_timing) == plan.reference  # on public values


def test_where_plain_inputs_are_degenerate_no_call_is_plain():
    # the judge leaves PLAIN out of `allowed` where a trivial answer passes on plain inputs
    allowed = [int(Distribution.WIDE), int(Distribution.HEAVY)]
    for trials in (1, 2, 3, 5):
        for _ in range(20):
            plan = plan_seeds(None, trials, second=True, allowed=allowed)
            dists = {distribution_of(s) for s in (*plan.trials, plan.timing, plan.coverage)}
            assert dists <= {Distribution.WIDE, Distribution.HEAVY}, dists
            if trials >= 2:  # distinct while they last: both variants among the primary trials
                assert {distribution_of(s) for s in plan.trials[:trials]} == {Distribution.WIDE, Distribution.HEAVY}


def test_the_perturbation_mode_rides_on_every_seed_of_the_plan():
    plan = plan_seeds(3, 3, second=True, across=True)
    seeds = (*plan.trials, plan.timing, plan.coverage)
    assert all(across_rows(s) for s in seeds) and not any(across_rows(s) for s in plan_seeds(3, 3, True).trials)
    assert [torch_seed(s) for s in seeds] == [torch_seed(s) for s in (*plan_seeds(3, 3, True).trials,
                                                                       plan_seeds(3, 3, True).timing,
                                                                       plan_seeds(3, 3, True).coverage)]
    s = perturbed(plan.timing, timed_step(7))
    assert across_rows(s) and perturbation_of(s) == timed_step(7)  # a step keeps the mode
    assert distribution_of(s) is distribution_of(plan.timing) and not across_rows(with_across(s, False))


def test_random_variants_are_heavy_tailed_sparse_or_signed_and_agree_on_both_sides():
    seed, cpu = 99, torch.device("cpu")

    def draws(get_inputs):  # one input per reference: its raw draw is the first in every distribution
        ref = types.SimpleNamespace(get_inputs=get_inputs)
        return [harness.draw_inputs(ref, with_distribution(seed, d), cpu)[0] for d in (
            Distribution.PLAIN, Distribution.HEAVY, Distribution.SPARSE, Distribution.SIGNED, Distribution.TINY)]

    plain, heavy, sparse, signed, tiny = draws(lambda: [torch.randn(256, 256)])
    again = harness.draw_inputs(types.SimpleNamespace(get_inputs=lambda: [torch.randn(256, 256)]),
                                with_distribution(seed, Distribution.HEAVY), cpu)[0]
    assert torch.equal(heavy, again)
    ratio = heavy.abs() / plain.abs().clamp_min(1e-30)
    assert ratio.min() > 0.1 and ratio.max() > 20 and ratio.max() <= 100 + 1e-3  # x / sqrt(E), E floored
    zeros = (sparse == 0).float().mean()
    assert 0.4 < zeros < 0.6 and torch.equal(sparse[sparse != 0], plain[sparse != 0])
    assert torch.allclose(tiny, plain * 1e-3)
    plain16, heavy16, _, signed16, _ = draws(lambda: [torch.rand(256, 256, dtype=torch.float16)])
    assert heavy16.isfinite().all() and (heavy16.float().abs() / plain16.float().clamp_min(1e-3)).max() <= 10.01
    assert torch.equal(signed16.abs(), plain16) and (signed16 < 0).any()  # rand's values turned mixed


def test_a_draw_is_spread_in_place_bit_for_bit_as_spread_returns_it():
    """Inside ``get_inputs`` a fresh draw is spread where it lies (no full-size temporaries beside it:
    at KernelBench's sizes each is 6.4 GB), with the very values `spread` computes into a new tensor:
    both sides of a comparison, and every recorded seed, keep their inputs."""
    for dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        for dist in Distribution:
            torch.manual_seed(11)
            x = torch.randn(300, 129).to(dtype)
            state = torch.get_rng_state()
            expected = harness.spread(x.clone(), dist)
            torch.set_rng_state(state)
            own = x.clone()
            got = harness.spread_in_place(own, dist)
            assert got.data_ptr() == own.data_ptr() and got.dtype == dtype
            assert torch.equal(got, expected) and torch.equal(got.signbit(), expected.signbit()), (dtype, dist)
    drawn = []

    def get_inputs():
        drawn.append(torch.randn(64, 64))
        return [drawn[-1]]

    x = harness.draw_inputs(types.SimpleNamespace(get_inputs=get_inputs),
                            with_distribution(5, Distribution.HEAVY), torch.device("cpu"))[0]
    assert x is drawn[0]  # the draw itself, spread: no second tensor of its size


def test_variants_apply_to_the_draws_so_the_structure_get_inputs_builds_stays():
    cpu = torch.device("cpu")

    def get_inputs():
        a = torch.rand(48, 48)
        return [torch.tril(a), (a + a.T) / 2, torch.softmax(torch.randn(6, 40), -1), torch.ones(3)]

    ref = types.SimpleNamespace(get_inputs=get_inputs)
    for dist in Distribution:
        tri, sym, rows, ones = harness.draw_inputs(ref, with_distribution(7, dist), cpu)
        assert torch.equal(tri, torch.tril(tri)) and torch.equal(sym, sym.T), dist
        assert torch.allclose(rows.sum(-1), torch.ones(6)) and torch.equal(ones, torch.ones(3)), dist
    shifted = harness.draw_inputs(ref, with_distribution(7, Distribution.SHIFTED), cpu)
    assert shifted[0][5, 2] > 99 and shifted[0][2, 5] == 0  # the draw moved, the zeros stayed


REFERENCE = types.SimpleNamespace(get_inputs=lambda: [torch.randn(4, 8), torch.randint(0, 3, (4,)),
                                                      torch.randn(2, dtype=torch.float16)])


def test_varied_inputs_scale_or_shift_floats_only_and_agree_on_both_sides():
    seed, cpu = 1234, torch.device("cpu")
    plain = harness.draw_inputs(REFERENCE, seed, cpu)
    wide = harness.draw_inputs(REFERENCE, with_distribution(seed, Distribution.WIDE), cpu)
    shifted = harness.draw_inputs(REFERENCE, with_distribution(seed, Distribution.SHIFTED), cpu)
    again = harness.draw_inputs(REFERENCE, with_distribution(seed, Distribution.WIDE), cpu)
    assert torch.equal(wide[0], plain[0] * 8) and torch.equal(wide[1], plain[1]) and torch.equal(wide[2], plain[2] * 4)
    assert torch.equal(shifted[0], plain[0] + 100) and torch.equal(shifted[2], plain[2])
    assert all(torch.equal(x, y) for x, y in zip(wide, again))
    opted_out = types.SimpleNamespace(get_inputs=REFERENCE.get_inputs, INPUT_VARIANTS=False)
    kept = harness.draw_inputs(opted_out, with_distribution(seed, Distribution.WIDE), cpu)
    assert torch.equal(kept[0], plain[0])


def test_spread_inputs_fail_a_dropped_term_and_an_unstable_softmax():
    """Mechanism 7: both pass at scale 1 and fail on spread inputs (kernelgym tolerance 1e-2)."""
    x = torch.randn(8, 4096)
    wide, shifted = harness.spread(x, Distribution.WIDE), harness.spread(x, Distribution.SHIFTED)

    def close(a, b):
        return torch.allclose(a, b, atol=1e-2, rtol=1e-2)

    def naive(t):
        return t.exp() / t.exp().sum(-1, keepdim=True)

    assert close(x, x + torch.softmax(x, -1)) and not close(wide, wide + torch.softmax(wide, -1))
    assert close(naive(x), torch.softmax(x, -1))
    assert not torch.isfinite(naive(shifted)).all() and torch.isfinite(torch.softmax(shifted, -1)).all()


def test_every_call_looks_the_same_so_a_tell_changes_nothing(evaluator):
    """A solution that sabotages its output whenever a fresh allocation is not poisoned (the tell of
    the old poisoned run) stays correct: trials, ordinary calls and integrity runs all poison."""
    from gym_cases import RELU_SOLUTION, request

    from drkernel.gym import Status

    tell = RELU_SOLUTION.replace(
        "        return y\n",
        "        probe = torch.empty(8, device=x.device)\n"
        "        if not torch.isnan(probe).all():\n"
        "            y.zero_()\n"
        "        return y\n")
    assert tell != RELU_SOLUTION
    r = evaluator.evaluate(request(tell, trials=3))
    assert r.status is Status.CORRECT, r.error
    assert [h for h in r.hacks if not h.strict_only] == [] and r.op_coverage >= 0.9


def test_explicit_seed_reproduces_the_trials(evaluator):
    from gym_cases import RELU_SOLUTION, request

    a, b = (evaluator.evaluate(request(RELU_SOLUTION, seed=5)) for _ in range(2))
    c = evaluator.evaluate(request(RELU_SOLUTION))
    assert [t.seed for t in a.trials] == [t.seed for t in b.trials]
    assert [t.seed for t in c.trials] != [t.seed for t in a.trials]


def _judged(fn, cheat, dist, seed=5):
    """(cheat passes at plain, cheat passes at ``dist``) with the bounds the judge derives."""
    from drkernel.gym.judge.compare import compare_outputs
    from drkernel.gym.judge.tolerance import derive

    ref_module = types.SimpleNamespace(get_inputs=lambda: [torch.randn(64, 1024)])
    out = []
    for d in (Distribution.PLAIN, dist):
        (x,) = harness.draw_inputs(ref_module, with_distribution(seed, d), torch.device("cpu"))
        ref = fn(x)
        bounds = derive(ref, fn(x.double()), [x], "kernelgym")
        out.append(compare_outputs(cheat(x), ref, "kernelgym", bounds=bounds).passed)
    return tuple(out)


def test_a_statistic_on_part_of_the_row_fails_on_heavy_tails():
    def softmax(x):
        return torch.softmax(x, dim=-1)

    def partial_max(x):  # the max subtraction uses the first 128 columns only
        e = torch.exp(x - x[:, :128].max(dim=-1, keepdim=True).values)
        return e / e.sum(dim=-1, keepdim=True)

    assert _judged(softmax, partial_max, Distribution.HEAVY) == (True, False)


def test_a_term_below_atol_at_scale_one_fails_on_tiny_inputs():
    def x_plus_softmax(x):
        return x + torch.softmax(x, dim=-1)

    assert _judged(x_plus_softmax, lambda x: x.clone(), Distribution.TINY) == (True, False)


def test_a_shortcut_for_non_negative_values_fails_on_signed_inputs():
    ref_module = types.SimpleNamespace(get_inputs=lambda: [torch.rand(64, 256)])
    (x,) = harness.draw_inputs(ref_module, with_distribution(3, Distribution.SIGNED), torch.device("cpu"))
    assert (x < 0).any()  # torch.abs(x) == x held for every plain draw; not here
    assert not torch.equal(torch.abs(x), x)


def test_a_perturbation_step_lives_in_its_own_bits():
    seed = with_distribution(0xABCDEF, Distribution.HEAVY)
    assert perturbation_of(seed) == 0 and perturbation_of(perturbed(seed, 2)) == 2
    assert torch_seed(perturbed(seed, 2)) == torch_seed(seed)  # the same draw underneath
    assert distribution_of(perturbed(seed, 2)) is Distribution.HEAVY
    assert perturbed(perturbed(seed, 2), 0) == seed
    with pytest.raises(ValueError):
        perturbed(seed, 4096)
    assert "sparse_perturb" in INTEGRITY_RUNS


def test_pairs_per_tensor_worked_by_hand():
    # one pair per 8192 elements, at least one, at most 256; nothing to swap in a single element
    assert [pair_count(n) for n in (1, 2, 2048, 8192 * 10, 10**9)] == [0, 1, 1, 10, 256]


PERTURBED = types.SimpleNamespace(get_inputs=lambda: [torch.randn(64, 1024), torch.randint(0, 5, (300,)),
                                                      torch.randn(8, 6).t(), torch.randn(3).expand(4, 3), 3])


@pytest.mark.parametrize("dist", [Distribution.PLAIN, Distribution.SPARSE])
def test_a_perturbed_draw_swaps_a_few_pairs_of_each_tensor_the_same_way_on_both_sides(dist):
    seed, cpu = with_distribution(4321, dist), torch.device("cpu")
    base = harness.draw_inputs(PERTURBED, seed, cpu)
    first, again = (harness.draw_inputs(PERTURBED, perturbed(seed, 1), cpu) for _ in range(2))
    second = harness.draw_inputs(PERTURBED, perturbed(seed, 2), cpu)
    assert first[-1] == 3
    for b, x, y, z in zip(base[:-1], first, again, second):
        assert torch.equal(x, y) and x.shape == b.shape
        assert x.stride() == b.stride() or 0 in b.stride()  # an expanded view is materialised first
        assert int((x != b).sum()) == 2 * pair_count(b.numel())  # pairs of unequal values where any
        assert torch.equal(x.flatten().sort().values, b.flatten().sort().values)  # the same values
        assert not torch.equal(x, z)  # each step its own positions


def test_every_dtype_is_perturbed_through_its_bits():
    # index_put has no uint16 kernel on CPU, so swaps move each value's bits as an integer
    ref = types.SimpleNamespace(get_inputs=lambda: [torch.randn(4096).to(torch.float8_e4m3fn),
                                                    torch.randint(0, 60000, (4096,)).to(torch.uint16),
                                                    torch.randn(64, dtype=torch.complex128)])
    cpu = torch.device("cpu")
    base, changed = harness.draw_inputs(ref, 99, cpu), harness.draw_inputs(ref, perturbed(99, 1), cpu)
    bits = [(x.view(torch.uint8), y.view(torch.uint8)) if x.element_size() == 1 else
            (x.view(torch.int16), y.view(torch.int16)) if x.element_size() == 2 else (x, y)
            for x, y in zip(base, changed)]
    assert [int((x != y).sum()) for x, y in bits] == [2, 2, 2]


STRUCTURED = types.SimpleNamespace(get_inputs=lambda: (lambda a, b: [
    torch.tril(a), (b + b.mT) / 2, torch.softmax(torch.randn(16, 512), -1)])(torch.rand(2, 96, 96), torch.rand(96, 96)))


def test_a_swap_keeps_the_structure_get_inputs_built():
    # triangular stays triangular (zeros kept), symmetric stays symmetric (mirrored swaps), each row keeps
    # its values (swaps within a row): a kernel relying on what the problem promises is not refused
    cpu = torch.device("cpu")
    base = harness.draw_inputs(STRUCTURED, 55, cpu)
    steps = [perturbed(55, 1), perturbed(55, 2)] + [perturbed(55, timed_step(i)) for i in range(3)]
    for seed in steps:  # swaps at sparse_perturb's steps, fresh draws at the timed calls'
        tri, sym, rows = harness.draw_inputs(STRUCTURED, seed, cpu)
        assert torch.equal(tri, torch.tril(tri)) and torch.equal(sym, sym.T)
        if seed in steps[:2]:
            assert torch.equal(rows.sort(-1).values, base[2].sort(-1).values)
        assert all(not torch.equal(x, b) for x, b in zip((tri, sym, rows), base))  # each one changed
    timed = harness.TimedDraws(STRUCTURED, 55, cpu)
    for i in range(3):
        assert all(torch.equal(a, d) for a, d in zip(timed(i), harness.draw_inputs(STRUCTURED, steps[2 + i], cpu)))


@pytest.mark.parametrize("allowed", [None, [0, 1, 2, 3, 4, 5, 6], [0, 1, 4], [1, 3, 5], [0]])
@pytest.mark.parametrize("trials,second", [(5, False), (5, True), (3, False), (9, True), (1, False)])
def test_every_drawn_plan_is_accepted_for_replay(allowed, trials, second):
    for across in (False, True):
        for _ in range(20):
            plan = plan_seeds(None, trials, second, allowed, across=across)
            assert replayed_plan(plan, trials, second, allowed, across=across) is plan


def test_a_supplied_plan_that_weakens_the_trials_is_refused():
    """A replayed plan may only be one the judge could have drawn: no plain-only trials, no plain
    timed calls where plain is excluded, every integrity run, the judge's perturbation mode."""
    allowed = [1, 2, 3, 4, 5, 6]  # plain degenerate: every trial and call on a variant
    plan = plan_seeds(None, 5, False, allowed)
    replayed_plan(plan, 5, False, allowed)
    plain = lambda s: with_distribution(s, Distribution.PLAIN)  # noqa: E731
    bad = {
        "plain trials": replace(plan, trials=tuple(map(plain, plan.trials))),
        "one variant only": replace(plan, trials=tuple(with_distribution(s, Distribution.WIDE) for s in plan.trials)),
        "plain timed calls": replace(plan, timing=plain(plan.timing)),
        "a trial fewer": replace(plan, trials=plan.trials[:-1]),
        "an integrity run dropped": replace(plan, integrity_order=plan.integrity_order[:-1], decoys=plan.decoys[:-1]),
        "another perturbation mode": replace(plan, coverage=with_across(plan.coverage, True)),
    }
    for name, tampered in bad.items():
        with pytest.raises(ValueError, match="could draw"):
            replayed_plan(tampered, 5, False, allowed)
    with pytest.raises(ValueError, match="not a seed plan"):
        SeedPlan.from_dict({"weight": 0})
    assert SeedPlan.from_dict(asdict(plan)) == plan


def test_a_replay_request_evaluates_on_the_revealed_inputs_again(evaluator):
    """A result's revealed seeds, supplied back, give the very same plan: the same trial, timing and
    coverage seeds in the new result; a tampered plan is refused as a configuration error."""
    from drkernel.errors import ConfigError
    from drkernel.gym.config import EvalRequest
    from gym_cases import RELU_SOLUTION, request

    first = evaluator.evaluate(request(RELU_SOLUTION))
    plan = SeedPlan.from_dict(first.provenance.seeds)
    again = evaluator.evaluate(replace(request(RELU_SOLUTION), seed_plan=plan))
    assert again.provenance.seeds == first.provenance.seeds and again.valid
    wire = replace(request(RELU_SOLUTION), seed_plan=plan).to_dict()
    assert EvalRequest.from_dict(wire).seed_plan == plan
    assert replace(request(RELU_SOLUTION), seed_plan=plan).content_hash() != request(RELU_SOLUTION).content_hash()
    with pytest.raises(ConfigError):
        evaluator.evaluate(replace(request(RELU_SOLUTION), seed_plan=replace(plan, trials=plan.trials[:1])))


DRAWN = """
import torch
def get_inputs():
    return [torch.randn(8, 8), torch.rand(3)]
"""


def test_a_draw_seeds_as_torch_manual_seed_does():
    reference = types.ModuleType("drawn")
    exec(DRAWN, reference.__dict__)
    seed = perturbed(12345, timed_step(3))
    drawn = harness.draw_inputs(reference, seed, torch.device("cpu"))
    from drkernel.gym.seeds import drawing_seed
    torch.manual_seed(drawing_seed(seed))
    expected = reference.get_inputs()
    assert all(torch.equal(a, b) for a, b in zip(drawn, expected))


def test_a_draw_raises_no_flood_of_audit_events():
    """torch.manual_seed's lazy seeding of backends that are not started records a stack trace, one
    audit event per frame, each checked by the candidate's audit hook: hundreds per timed call."""
    import sys
    reference = types.ModuleType("drawn")
    exec(DRAWN, reference.__dict__)
    events: list[str] = []
    listening = [True]
    sys.addaudithook(lambda event, args: events.append(event) if listening[0] else None)
    try:
        harness.draw_inputs(reference, perturbed(12345, timed_step(2)), torch.device("cpu"))
    finally:
        listening[0] = False
    assert len(events) < 10, sorted(set(events))  # 34 with torch.manual_seed and no hook of the gym


def test_a_large_draw_that_might_not_fit_first_frees_tensors_only_cycles_hold(monkeypatch):
    """Tensors of a call dropped while a reference cycle holds them are freed before the next large
    draw when it might not fit (at full size each is gigabytes; the cyclic collector runs by object
    counts, not bytes); a draw with room to spare pays no collection."""
    import gc
    import weakref

    ref = types.SimpleNamespace(get_inputs=lambda: [torch.randn(32, 32)])
    cpu = torch.device("cpu")

    def dropped_in_a_cycle() -> weakref.ref:
        held = torch.randn(64, 64)
        cycle: dict = {"t": held}
        cycle["self"] = cycle
        return weakref.ref(held)

    was = gc.isenabled()
    gc.disable()  # only the draw may collect
    try:
        monkeypatch.setattr(harness, "COLLECT_BYTES", 1024)  # the 4-KB draws count as large
        monkeypatch.setattr(harness, "free_bytes", lambda device: 1 << 40)
        harness.draw_inputs(ref, 3, cpu)
        alive = dropped_in_a_cycle()
        harness.draw_inputs(ref, 4, cpu)
        assert alive() is not None  # room to spare: no collection
        monkeypatch.setattr(harness, "free_bytes", lambda device: 4096)  # less than twice the last draw
        gone = dropped_in_a_cycle()
        harness.draw_inputs(ref, 5, cpu)
        assert gone() is None and alive() is None
    finally:
        if was:
            gc.enable()
        gc.collect()


def test_after_a_draw_the_generators_tell_nothing_of_its_seed():
    """Red team 17: the global generators' state after a harness draw gave away the draw's seed (the
    first bytes of ``torch.get_rng_state()``), so a solution imported after the timing draw knew every
    timed call's inputs. Every draw and every model construction now ends with the generators
    reseeded from the OS: two draws at one seed agree, the states after them do not, and neither is
    the state a plain seeding at that seed leaves."""
    ref = types.SimpleNamespace(get_inputs=lambda: [torch.randn(16, 16)])
    cpu = torch.device("cpu")
    a = harness.draw_inputs(ref, 1234, cpu)[0]
    after_a = torch.get_rng_state()
    b = harness.draw_inputs(ref, 1234, cpu)[0]
    after_b = torch.get_rng_state()
    assert torch.equal(a, b)
    assert not torch.equal(after_a, after_b)
    harness.seed_generators(harness.drawing_seed(1234))
    torch.randn(16, 16)
    assert not torch.equal(after_a, torch.get_rng_state())
    harness.build_model(torch.nn.Linear, [4, 4], 99, cpu)
    after_model = torch.get_rng_state()
    harness.build_model(torch.nn.Linear, [4, 4], 99, cpu)
    assert not torch.equal(after_model, torch.get_rng_state())
