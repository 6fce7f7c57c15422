"""The ``sparse_perturb`` integrity run (gym/candidate/integrity.py) against a real judge
(gym/judge/main.py): a call on a trial's inputs, then on new tensors equal to them but at a few
secret swapped pairs (gym/harness/perturb.py), judged against the reference on those inputs; and
the timed calls' variation (one swapped pair per tensor and call), judged the same way."""

from __future__ import annotations

import textwrap
import types

import torch
import torch.nn as nn

from drkernel.gym.candidate.integrity import IntegrityHook, _Runs
from drkernel.gym.harness import inputs as harness
from drkernel.gym.ipc import encode_tree
from drkernel.gym.judge.main import Judge
from drkernel.gym.messages import CompareRequest
from drkernel.gym.seeds import PERTURB_TAGS, TIMED_TAG_PREFIX, perturbed, timed_step

CPU = torch.device("cpu")
SOFTMAX = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=1)
    def get_inputs():
        return [torch.randn(64, 1024)]
""")
SEEDS = [7_001, 7_002, 7_003]


def _request(seed: int, value, tag: str | None, trial: int = 0) -> tuple[CompareRequest, bytes]:
    tree, blob = encode_tree(value)
    return CompareRequest("job", trial, SOFTMAX, seed, 0, "kernelgym", tree, tag), blob


def test_the_judge_compares_a_perturbed_call_against_the_reference_on_the_perturbed_inputs():
    judge, ref = Judge(None, CPU), harness.load_reference(SOFTMAX)
    (base,) = harness.draw_inputs(ref, SEEDS[0], CPU)
    stale = torch.softmax(base, dim=1)
    for step, tag in enumerate(PERTURB_TAGS, start=1):
        (changed,) = harness.draw_inputs(ref, perturbed(SEEDS[0], step), CPU)
        assert not judge.compare(*_request(SEEDS[0], stale, tag), []).passed  # the cached answer
        assert judge.compare(*_request(SEEDS[0], torch.softmax(changed, dim=1), tag), []).passed
    # the perturbed reference is not the trial's: a later plain comparison of that trial sees its own
    tree, blob = encode_tree((stale, [base]))
    assert judge.compare(CompareRequest("job", 0, SOFTMAX, SEEDS[0], 0, "kernelgym", tree, None), blob, []).passed


class _Context:
    """What the hook reads of the candidate's context, comparing through a real judge."""

    def __init__(self) -> None:
        self.reference = harness.load_reference(SOFTMAX)
        self.seeds = SEEDS
        self.device = CPU
        self.cpu_mode = True
        self.judge = Judge(None, CPU)
        self.tags: list[str] = []

    def compare(self, outputs, trial: int, tag: str) -> dict:
        self.tags.append(tag)
        return {"passed": self.judge.compare(*_request(self.seeds[trial], outputs, tag, trial), []).passed}


class _Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


class _SampledMemo(_Softmax):
    """Caches by eight values at fixed scattered positions: a full refill misses, a sparse change
    almost never does (16 swapped values of 65536 here)."""

    def __init__(self) -> None:
        super().__init__()
        self.memo: dict[tuple[float, ...], torch.Tensor] = {}

    def forward(self, x):
        key = tuple(x.reshape(-1)[::8191][:8].tolist())
        if key not in self.memo:
            self.memo[key] = super().forward(x)
        return self.memo[key].clone()


def _run(model: nn.Module) -> tuple[dict, list[str]]:
    ctx, hook = _Context(), IntegrityHook()

    def make(trial: int) -> list:
        return harness.draw_inputs(ctx.reference, ctx.seeds[trial], CPU)

    r = _Runs(ctx, model, make, len(SEEDS))
    hook._perform(r, hook._sparse_perturb(r, {}))  # the run's steps, through the one executor
    return hook.runs, ctx.tags


def test_a_cache_keyed_on_sampled_values_fails_both_steps_and_an_honest_model_passes():
    runs, tags = _run(_SampledMemo())
    assert tags == list(PERTURB_TAGS) and runs == {tag: False for tag in PERTURB_TAGS}
    runs, _ = _run(_Softmax())
    assert runs == {tag: True for tag in PERTURB_TAGS}


def test_each_timed_call_draws_its_own_inputs_as_the_judge_draws_them():
    """Nothing of one timed call's inputs is in another's (a cache or an incremental update from the
    last call saves nothing), and each is what the judge draws for that call's tag."""
    ref = types.SimpleNamespace(get_inputs=lambda: [torch.randn(64, 1024), torch.randint(0, 2, (300,)),
                                                    torch.randn(8, 6).t(), 3])
    seed = SEEDS[1]
    base = harness.draw_inputs(ref, seed, CPU)
    draw = harness.TimedDraws(ref, seed, CPU)
    calls = {call: draw(call) for call in (0, 1, 17, 39, 4000)}
    for call, args in calls.items():
        drawn = harness.draw_inputs(ref, perturbed(seed, timed_step(call)), CPU)  # what the judge compares against
        assert all(torch.equal(a, d) for a, d in zip(args[:3], drawn[:3])) and args[3] == 3
        assert args[2].stride() == base[2].stride()  # the structure get_inputs builds (a transposed view)
        for other in (base, *[v for c, v in calls.items() if c != call]):
            assert float((args[0] == other[0]).float().mean()) < 0.01  # every value new
def test_the_judge_compares_a_timed_call_on_its_own_draw():
    judge, ref = Judge(None, CPU), harness.load_reference(SOFTMAX)
    (varied,) = harness.draw_inputs(ref, perturbed(SEEDS[2], timed_step(5)), CPU)
    (plain,) = harness.draw_inputs(ref, SEEDS[2], CPU)
    tag = f"{TIMED_TAG_PREFIX}5"
    assert judge.compare(*_request(SEEDS[2], torch.softmax(varied, dim=1), tag), []).passed
    assert not judge.compare(*_request(SEEDS[2], torch.softmax(plain, dim=1), tag), []).passed


def test_the_profiler_pass_runs_on_a_draw_no_other_call_sees(monkeypatch):
    """The profiler pass and the wall-clock cross-check (GPU only) run unobserved, like the timed calls,
    on inputs of their own: not trial 0's (a solution recognising those ran honestly there alone), not
    the coverage run's; the output's size comes from an observed call on trial 0's inputs."""
    from drkernel.gym.candidate import integrity

    ref = types.SimpleNamespace(get_inputs=lambda: [torch.randn(32, 64)])
    trial0 = harness.draw_inputs(ref, SEEDS[0], CPU)
    runs = types.SimpleNamespace(ctx=types.SimpleNamespace(reference=ref, device=CPU, native_kernels=()),
                                 model=lambda x: x * 2, make_inputs=lambda i: harness.draw_inputs(ref, SEEDS[i], CPU))
    plan = {"coverage_seed": SEEDS[2]}
    fresh = integrity.profiled_inputs(runs, plan)
    assert not torch.equal(fresh[0], trial0[0])
    assert not torch.equal(fresh[0], harness.draw_inputs(ref, SEEDS[2], CPU)[0])
    assert torch.equal(fresh[0], integrity.profiled_inputs(runs, plan)[0])  # reproducible from the seed

    seen = {}
    monkeypatch.setattr(integrity, "profile_forward", lambda fn, args, own, native: seen.setdefault(
        "profiled", args) and {"kernels": [], "off_stream": []})
    monkeypatch.setattr(integrity, "hidden_work", lambda fn, args: seen.setdefault("hidden", args) and {})
    hook = integrity.IntegrityHook()
    runs.model = lambda x: seen.setdefault("observed", x) * 2
    runs.ctx.cpu_mode = False  # the GPU pass's observed call is the last step of the runs (`_steps`)
    hook._perform(runs, hook._steps(runs, plan, []))
    hook._gpu_checks(runs, fresh)
    assert torch.equal(seen["observed"], trial0[0]) and seen["profiled"] is fresh and seen["hidden"] is fresh
    assert hook.gpu["out_bytes"] == trial0[0].numel() * 4 and hook.calls == 1
