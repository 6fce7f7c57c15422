"""End-to-end agent benchmark on a GPU: scripted and tiny-model policies through the real gym.

Part 1 replays each built-in problem's solution files over 3 turns against the in-process gym on
CUDA with real timings. Samples take scripts round-robin: A = broken -> lazy/slow -> gold,
B = lazy/slow -> gold -> gold, so Fast@p moves from turn to turn. (A problem without a broken file
answers "no code" in its place; one without lazy/slow files repeats its broken answer.)
Part 2 sends a tiny locally built transformer (random weights, on the GPU) through the same episode
path: its answers are unparseable, which the pipeline must classify with zero reward.

Problems: by default the first ``--limit`` (12) of the built-in problems that have a broken, lazy or
slow file, taken round-robin over the levels (so every level is in, and Fast@p has somewhere to move
from); ``--limit 0`` runs all 41 (about 250 evaluations: several minutes on an H100). The defaults keep
the script within about 4 minutes on an H100 (72 evaluations at 4 in flight with 8 warm candidates).

Prints per-turn and best-by-turn Fast@p, outcome counts, throughput, and CHECK lines (FAIL on an
unexpected result); writes ``scripted.jsonl``, ``scripted_metrics.json``, ``tiny_metrics.json`` and
plots (``fast_at_p.png``, ``speedups.png``, ``outcomes.png``) to ``--out``; exits 1 if any check
failed. Needs torch, triton, transformers only (matplotlib for the plots).

    python benchmarks/agent_e2e_gpu.py [--samples 2] [--limit N] [--out DIR]
    python benchmarks/agent_e2e_gpu.py --device cpu --limit 3 --concurrency 2 --pool-size 2   # dry run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from drkernel.agent import EpisodeConfig, SamplingParams, ScriptedPolicy, run_episodes
from drkernel.agent.policies.scripted import builtin_script
from drkernel.bench.io import JsonlWriter
from drkernel.bench.metrics import PS, p_key, records_from_episodes, summarize
from drkernel.bench.report import plot_fast, plot_outcomes, plot_speedups
from drkernel.gym import EvalConfig, InProcessEvaluator
from drkernel.problems import load_builtin

NO_CODE = "I am not sure how to write this kernel yet; let me think about the memory layout first."
FAILS: list[str] = []


def check(ok: bool, what: str) -> None:
    print(f"CHECK {'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        FAILS.append(what)


def scripts_for(problem):
    labels = set(problem.metadata.get("solutions", {}).values())
    broken = builtin_script(problem, ["broken"])[0] if "broken" in labels else NO_CODE
    mid_labels = [lab for lab in ("lazy", "slow") if lab in labels]
    mid = builtin_script(problem, mid_labels[:1])[0] if mid_labels else broken
    gold = builtin_script(problem, ["gold"])[0]
    return [[broken, mid, gold], [mid, gold, gold]]


def select(problems, limit: int):
    """The first ``limit`` problems with a non-gold file, round-robin over levels (0: every problem)."""
    if not limit:
        return problems
    by_level: dict[int, list] = {}
    for p in problems:
        if set(p.metadata.get("solutions", {}).values()) - {"gold"}:
            by_level.setdefault(p.level, []).append(p)
    queues = [by_level[level] for level in sorted(by_level)]
    picked = []
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                picked.append(q.pop(0))
    return picked


def table(metrics) -> str:
    head = "turn     " + "".join(f"{'Fast@' + format(p, 'g'):>10}" for p in PS) + f"{'hacked':>9}{'lazy':>7}"
    rows = [head]
    for kind in ("per_turn", "best_by_turn"):
        for r in metrics[kind]:
            label = f"{r['turn']}" if kind == "per_turn" else f"best@{r['turn']}"
            cells = "".join(
                f"{'n/m' if r[p_key(p)] is None else format(100 * r[p_key(p)], '.1f'):>10}" for p in PS
            )
            extra = f"{100 * r['hacked']:>9.1f}{100 * r['lazy']:>7.1f}" if kind == "per_turn" else ""
            rows.append(f"{label:<9}{cells}{extra}")
    return "\n".join(rows)


def done(ep, writer, t0) -> None:
    """Write a finished episode and print one line, so a run cut short still shows its progress."""
    writer.write(ep)
    turns = " -> ".join(
        f"{t.outcome}" + (f" {t.speedup:.2f}x" if t.valid and t.speedup is not None else "") for t in ep.turns
    )
    print(f"[{time.perf_counter() - t0:7.1f}s] {ep.id}: {turns}", flush=True)


async def scripted_part(problems, evaluator, samples, out, device):
    policy = ScriptedPolicy.for_problems([(p, scripts_for(p)) for p in problems])
    timed = device != "cpu"
    config = EpisodeConfig(turns=3, eval_config=EvalConfig(device=device, timing=timed), concurrency=64)
    (out / "scripted.jsonl").unlink(missing_ok=True)
    writer = JsonlWriter(out / "scripted.jsonl")
    t0 = time.perf_counter()
    episodes = await run_episodes(
        problems, policy, evaluator, config, samples=samples, on_episode=lambda ep: done(ep, writer, t0)
    )
    wall = time.perf_counter() - t0
    writer.close()
    metrics = summarize(records_from_episodes(episodes))
    evals = [t for e in episodes for t in e.turns if t.result is not None]
    print(
        f"\n== scripted policy: {len(problems)} problems x {samples} samples x 3 turns on "
        f"{evals[0].result.device_name if evals else '?'}"
    )
    print(table(metrics))
    per_turn = metrics["per_turn"]
    print("outcomes per turn:", json.dumps([r["outcomes"] for r in per_turn]))
    eval_s = sorted(t.eval_s for t in evals)
    print(
        f"throughput: {len(episodes)} episodes, {len(evals)} evaluations in {wall:.1f} s wall -> "
        f"{60 * len(episodes) / wall:.1f} episodes/min, {len(evals) / wall:.2f} evals/s; "
        f"eval latency median {eval_s[len(eval_s) // 2]:.2f} s, p90 {eval_s[int(0.9 * (len(eval_s) - 1))]:.2f} s"
    )
    gold_turns = [e.turns[2] for e in episodes]
    gold_valid = sum(t.valid for t in gold_turns)
    print(
        "invalid gold turns:",
        [
            (e.id, e.turns[2].outcome, (e.turns[2].result.error or "")[-200:] if e.turns[2].result else "")
            for e in episodes
            if not e.turns[2].valid
        ][:10],
    )
    check(metrics["timed"] == timed, f"timing measured: {metrics['timed']} (expected {timed})")
    check(
        gold_valid >= 0.9 * len(gold_turns), f"gold answers valid at turn 3: {gold_valid}/{len(gold_turns)}"
    )
    check(per_turn[2][p_key(0)] > per_turn[0][p_key(0)], "Fast@0 rises from turn 1 to turn 3")
    check(per_turn[0]["outcomes"].get("correct", 0) < len(episodes), "turn 1 is not all correct")
    check(
        all(
            r[p_key(p)] <= b[p_key(p)] + 1e-12
            for r, b in zip(per_turn, metrics["best_by_turn"])
            for p in PS
            if r[p_key(p)] is not None
        ),
        "best-by-turn >= per-turn for every p",
    )
    speedups = [t.result.speedup for t in evals if t.valid and t.result.speedup is not None]
    if speedups:
        print(
            f"valid speedups: n={len(speedups)} min {min(speedups):.2f} median {sorted(speedups)[len(speedups) // 2]:.2f} "
            f"max {max(speedups):.2f}"
        )
    summary = {
        "problems": len(problems),
        "samples": samples,
        "episodes": len(episodes),
        "evaluations": len(evals),
        "wall_s": wall,
        "episodes_per_min": 60 * len(episodes) / wall,
        "evals_per_s": len(evals) / wall,
        "eval_latency_median_s": eval_s[len(eval_s) // 2],
        "eval_latency_p90_s": eval_s[int(0.9 * (len(eval_s) - 1))],
    }
    (out / "scripted_metrics.json").write_text(json.dumps({**metrics, **summary}, indent=2))
    plots = [plot_fast(metrics, out / "fast_at_p.png"), plot_outcomes(metrics, out / "outcomes.png")]
    plots.append(plot_speedups(metrics, out / "speedups.png"))
    print("plots:", ", ".join(str(p) for p in plots if p is not None))
    fast = "  ".join(
        f"turn {r['turn']}: " + " ".join(
            f"F@{p:g}={'n/m' if r[p_key(p)] is None else format(100 * r[p_key(p)], '.0f') + '%'}" for p in PS
        )
        for r in per_turn
    )
    print(
        f"SUMMARY scripted: {fast}; {summary['evals_per_s']:.2f} evals/s, "
        f"{summary['episodes_per_min']:.1f} episodes/min, eval latency median {summary['eval_latency_median_s']:.2f} s"
    )
    return metrics


async def tiny_part(problems, evaluator, device, out):
    import torch

    from drkernel.agent.policies.hf_local import HFLocalPolicy
    from drkernel.agent.tiny import build_tiny

    model, tokenizer = build_tiny(seed=0)
    policy = HFLocalPolicy(model, tokenizer, device=device, batch_size=16, name="tiny")
    config = EpisodeConfig(
        turns=2,
        eval_config=EvalConfig(device=device, timing=device != "cpu"),
        concurrency=16,
        sampling=SamplingParams(temperature=1.0, top_p=0.95, max_tokens=256, seed=0),
    )
    t0 = time.perf_counter()
    episodes = await run_episodes(problems[:4], policy, evaluator, config, samples=4)
    wall = time.perf_counter() - t0
    turns = [t for e in episodes for t in e.turns]
    tokens = sum(len(t.token_ids or []) for t in turns)
    gen_s = sum(t.gen_s for t in turns)
    print(
        f"\n== tiny model ({sum(p.numel() for p in model.parameters())} params, {torch.cuda.get_device_name() if device != 'cpu' else 'cpu'}): "
        f"{len(episodes)} episodes x 2 turns in {wall:.1f} s, {tokens} tokens generated, "
        f"batches {policy._batcher.batches}"
    )
    print("outcomes:", json.dumps(summarize(records_from_episodes(episodes))["per_turn"][-1]["outcomes"]))
    check(
        all(t.token_ids and len(t.token_ids) == len(t.logprobs) for t in turns),
        "tiny turns carry token ids and log-probs",
    )
    check(
        all(t.reward == 0.0 for t in turns if t.outcome == "unparseable"), "unparseable tiny answers score 0"
    )
    check(max(policy._batcher.batches) > 1, "concurrent episodes were batched on the device")
    print(
        f"SUMMARY tiny: {tokens / max(wall, 1e-9):.0f} generated tokens/s over the run "
        f"({tokens} tokens, {wall:.1f} s; sum of per-call gen time {gen_s:.1f} s), batches {policy._batcher.batches}"
    )
    (out / "tiny_metrics.json").write_text(
        json.dumps(
            {
                "episodes": len(episodes),
                "tokens": tokens,
                "wall_s": wall,
                "tokens_per_s": tokens / max(wall, 1e-9),
                "gen_s_sum": gen_s,
                "batches": list(policy._batcher.batches),
                "outcomes": summarize(records_from_episodes(episodes))["per_turn"][-1]["outcomes"],
            },
            indent=2,
        )
    )


async def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument(
        "--limit", type=int, default=12, help="N problems with non-gold files, round-robin over levels (0: all)"
    )
    ap.add_argument("--concurrency", type=int, default=4, help="gym candidates in flight")
    ap.add_argument("--pool-size", type=int, default=8, help="warm gym candidates")
    ap.add_argument("--out", default=os.environ.get("OUT", "agent_e2e_out"))
    ap.add_argument("--device", default="cuda", help="cuda (real timings) or cpu (a dry run, no timing)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problems = select(load_builtin(), args.limit)
    print(f"{len(problems)} problems: {', '.join(p.key for p in problems)}", flush=True)
    evaluator = InProcessEvaluator(device=args.device, concurrency=args.concurrency, pool_size=args.pool_size)
    try:
        await scripted_part(problems, evaluator, args.samples, out, args.device)
        await tiny_part(problems, evaluator, args.device, out)
    finally:
        evaluator.close()
    print(f"\n{len(FAILS)} check(s) failed" if FAILS else "\nall checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
