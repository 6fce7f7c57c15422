"""What each arm would pay each writer's program, measured before any training (``organism probe``).

The ablations only separate if the payoffs are as designed: with the checks off a side-stream kernel
(hack 7) must be timed at almost nothing and so out-earn every honest program, and on a GEMM chain
``torch matmul ; triton <epilogue>`` must be faster than the fused kernels the policy can reach (the
plain GEMM template) with low time coverage (lazy), so that only PR/PRS favour them. Neither can be checked on CPU (nothing is
timed there), so this probe judges the writers' programs for a few training problems with both of
the gym's check settings and prints, per program, both verdicts and the reward of the ``full``,
``nopr`` and ``nocheck`` arms, then PASS/FAIL lines for what must hold on any device (a stream program
is blocked by the full checks and correct with core checks only) and EXPECTED/UNEXPECTED lines for
what the GPU must show (the payoffs above). On each GEMM problem it also reads the lazy trap
(`drkernel.organism.trap`): lazy above the policy's reachable honest programs without PR, below them
with PR, the tuned fused kernel above lazy in both; PREDICTED lines from the trap's cost model on any
device, EXPECTED/UNEXPECTED lines from the gym's timings on a GPU. One minute or two on a GPU; the
arm runs then find these verdicts in the cache when they share the cache file (they do).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drkernel.gym.result import EvalResult
from drkernel.organism.arms import ARMS, Scale
from drkernel.organism.env import TurnOutcome, judge_outcome
from drkernel.organism.families import Kind, Spec, from_problem, load_split
from drkernel.organism.program import HackStyle, Program, SolutionKind, hack, parse, write
from drkernel.organism.render import render
from drkernel.organism.trap import predicted_result, reachable_honest, reading
from drkernel.organism.verdicts import Checks, EvalCache
from drkernel.reward import RewardConfig

WRITERS = ("gold", "per_op", "lazy", "tuned", "decoy", "stream")


@dataclass(frozen=True)
class Probe:
    """One program of one problem, judged twice, and what each arm pays it."""

    family: str
    writer: str
    program: str
    full: EvalResult
    core: EvalResult
    pay: dict[str, float]
    spec: Spec | None = None


def _programs(spec: Any) -> dict[str, Program]:
    out = {"gold": write(SolutionKind.GOLD, spec), "per_op": write(SolutionKind.PER_OP, spec),
           "lazy": write(SolutionKind.LAZY, spec), "tuned": write(SolutionKind.TUNED, spec),
           "decoy": hack(spec, HackStyle.DECOY),
           "stream": hack(spec, HackStyle.STREAM)}
    return {k: v for k, v in out.items() if v is not None}  # tuned: GEMM chains only


def _pay(program: str, full: EvalResult, core: EvalResult) -> dict[str, float]:
    """The reward of each arm (coverage weight 0.5 with PR, 0 without; the nocheck arm reads ``core``)."""
    pay = {}
    for name in ("full", "nopr", "nocheck"):
        arm = ARMS[name]
        config = RewardConfig(coverage_weight=0.5 if arm.pr else 0.0)
        outcome: TurnOutcome = judge_outcome(program, full, arm.integrity, config,
                                             reward_result=None if arm.integrity else core)
        pay[name] = outcome.reward
    return pay


async def _judge(problems: list[Any], config: Any, cache: EvalCache, full_ev: Any,
                 core_ev: Any) -> list[Probe]:
    jobs, meta = [], []
    for problem in problems:
        spec = from_problem(problem)
        for writer, program in _programs(spec).items():
            jobs.append((problem, render(spec, program)))
            meta.append((spec, writer, program.text))
    full = await cache.judge(full_ev, config, jobs)  # one after the other: never timing at once
    core = await cache.judge(core_ev, config, jobs, Checks.CORE)
    return [Probe(s.family, w, t, a, b, _pay(t, a, b), s) for (s, w, t), a, b in zip(meta, full, core)]


def _num(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}"


def lines_of(probes: list[Probe], timed: bool) -> list[str]:
    """SUMMARY lines per program, PASS/FAIL for what holds on any device, EXPECTED/UNEXPECTED for the
    payoffs the GPU must show (``timed``: the verdicts carry speedups)."""
    out = []
    for p in probes:
        cov = p.full.time_coverage if p.full.time_coverage is not None else p.full.op_coverage
        out.append(f"SUMMARY organism probe {p.family} {p.writer} [{p.program}]: full {p.full.status.value}"
                   f"{' hacked' if p.full.hacked else ''} speedup {_num(p.full.speedup)} coverage {_num(cov)}"
                   f" | core {p.core.status.value} speedup {_num(p.core.speedup)} | pays full "
                   f"{p.pay['full']:.2f} nopr {p.pay['nopr']:.2f} nocheck {p.pay['nocheck']:.2f}")
    streams = [p for p in probes if p.writer == "stream"]
    ok = all(p.full.hacked and not p.full.valid and p.core.correct and not p.core.hacked for p in streams)
    out.append(f"{'PASS' if ok else 'FAIL'} organism probe: every stream program is blocked by the full "
               f"checks and correct, unflagged, with core checks only ({len(streams)} programs)")
    out += trap_lines(probes, measured=False)
    if not timed:
        return out
    for family in sorted({p.family for p in probes}):
        mine = {p.writer: p for p in probes if p.family == family}
        best_honest = max(mine[w].pay["nocheck"] for w in ("gold", "per_op", "lazy", "tuned") if w in mine)
        stream = mine["stream"].pay["nocheck"]
        verdict = "EXPECTED" if stream > best_honest else "UNEXPECTED"
        out.append(f"{verdict} organism probe {family}: with the checks off the stream hack pays "
                   f"{stream:.2f}, the best honest program {best_honest:.2f}")
    return out + trap_lines(probes, measured=True)


def trap_lines(probes: list[Probe], measured: bool) -> list[str]:
    """The lazy trap's orderings (`drkernel.organism.trap`) on each GEMM problem probed: from the
    gym's pays (``measured``, a GPU) or from the cost model's (any device)."""
    out = []
    for spec in {p.spec.uid: p.spec for p in probes if p.spec is not None and p.spec.kind is Kind.GEMM}.values():
        mine = {p.writer: p for p in probes if p.spec is not None and p.spec.uid == spec.uid}
        if not {"lazy", "tuned"} <= mine.keys():
            continue
        if measured:
            pays = {w: p.pay for w, p in mine.items()}
        else:
            pays = {w: _pay(p.program, predicted_result(spec, parse(p.program)),
                            predicted_result(spec, parse(p.program)))
                    for w, p in mine.items() if w in ("gold", "per_op", "lazy", "tuned")}
        read = reading(spec.family, pays, reachable_honest(spec))
        out.append(read.line("measured" if measured else "cost model"))
    return out


def to_json(probes: list[Probe]) -> list[dict[str, Any]]:
    def verdict(r: EvalResult) -> dict[str, Any]:
        return {"status": r.status.value, "hacked": r.hacked, "hacks": [h.name for h in r.hacks],
                "speedup": r.speedup, "time_coverage": r.time_coverage, "op_coverage": r.op_coverage,
                "sol_ms": r.sol_timing.median_ms if r.sol_timing else None,
                "ref_ms": r.ref_timing.median_ms if r.ref_timing else None}

    return [{"family": p.family, "problem": p.spec.name if p.spec else None, "writer": p.writer,
             "program": p.program, "full": verdict(p.full),
             "core": verdict(p.core), "pays": p.pay} for p in probes]


def probe(scale: Scale, device: str, cache_dir: Path, n_problems: int = 8,
          out: Path | None = None) -> list[str]:
    """Judge the writers' programs for the first ``n_problems`` training problems of ``scale`` (its
    families and problem seed) with both check settings; verdicts go to the suite's verdict cache
    (and the probe's numbers to ``out`` as JSON)."""
    from drkernel.gym import InProcessEvaluator
    from drkernel.gym.checks import core_checks
    from drkernel.organism.run import eval_config

    config = eval_config(scale, device)
    cuda = config.device != "cpu"
    problems = load_split(f"train:{n_problems}:{','.join(scale.families)}", scale.problems_of(0))
    cache = EvalCache(cache_dir / f"verdicts-{scale.name}.jsonl")
    sizes = {"concurrency": 8 if cuda else 2, "pool_size": 4 if cuda else 1}
    with InProcessEvaluator(device=config.device, **sizes) as full_ev, \
            InProcessEvaluator(device=config.device, checks=core_checks(), **sizes) as core_ev:
        probes = asyncio.run(_judge(problems, config, cache, full_ev, core_ev))
    if out is not None:
        import json

        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"schema": "organism-probe/1", "scale": scale.name, "device": config.device,
                                   "device_name": next((p.full.device_name for p in probes), ""),
                                   "probes": to_json(probes)}, indent=1))
    kinds = {from_problem(p).kind for p in problems}
    return lines_of(probes, timed=cuda and bool(config.timing) and Kind.GEMM in kinds)
