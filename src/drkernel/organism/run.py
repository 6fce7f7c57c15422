"""Drive one organism run: SFT the policy from scratch (cached per seed and scale), then RL it with the
project's trainer (`drkernel.rl.trainer.Trainer`) on an `OrganismEnv`, and write the run's JSON.

``run_suite`` runs several (arm, seed) pairs in one process with one verdict cache and one evaluator per
checks setting (full; core only for an arm with the hack checks off), so the arms of a seed start from
the same SFT weights and a program is judged once per checks setting for the suite.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from drkernel.devices import Device
from drkernel.gym.config import EvalConfig
from drkernel.organism.arms import Arm, Scale
from drkernel.organism.corpus import build_corpus
from drkernel.organism.env import EnvSettings, OrganismEnv
from drkernel.organism.families import load_split
from drkernel.organism.turns import DeviceTurns
from drkernel.organism.verdicts import EvalCache

log = logging.getLogger(__name__)
SCHEMA = "organism-run/1"


@dataclass(frozen=True)
class SftPolicy:
    """The SFT starting point of a seed: where it is saved and how it was made."""

    path: Path
    corpus: frozenset[tuple[str, str]]
    info: dict[str, Any]


def _fingerprint(scale: Scale, seed: int) -> str:
    keys = ("model", "families", "sft_specs", "sft_draws", "sft_steps", "sft_batch", "sft_lr", "problem_seed")
    text = json.dumps({k: scale.to_dict()[k] for k in keys} | {"seed": seed}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def sft_folder(scale: Scale, seed: int, cache_dir: Path) -> Path:
    """Where the SFT policy of ``seed`` at ``scale`` is kept (its settings' fingerprint in the name)."""
    return cache_dir / f"sft-{scale.model}-{seed}-{_fingerprint(scale, seed)}"


def prepare_policy(scale: Scale, seed: int, cache_dir: Path, device: torch.device) -> SftPolicy:
    """Tokenizer + model trained from scratch on the bad-habits corpus; reused when already on disk."""
    from drkernel.organism import model as m

    corpus = build_corpus(scale.sft_specs, seed, families=scale.families, draws=scale.sft_draws,
                          problem_seed=scale.problems_of(seed))
    pairs = frozenset((e.messages[-1]["content"] if len(e.messages) == 1 else e.messages[0]["content"],
                       e.completion) for e in corpus)
    path = sft_folder(scale, seed, cache_dir)
    info_file = path / "organism_sft.json"
    if info_file.exists():
        return SftPolicy(path, pairs, json.loads(info_file.read_text()))
    t0 = time.monotonic()
    tokenizer = m.build_tokenizer(corpus, m.SIZES[scale.model].vocab)
    model = m.build_model(tokenizer, m.SIZES[scale.model], seed)
    losses = m.sft(model, tokenizer, corpus, scale.sft_steps, scale.sft_batch, scale.sft_lr, seed, device)
    m.save(model.cpu(), tokenizer, path)
    info = {"params": m.n_params(model), "vocab": len(tokenizer), "examples": len(corpus),
            "steps": scale.sft_steps, "loss_first": losses[0],
            "loss_last": sum(losses[-10:]) / len(losses[-10:]),
            "seconds": time.monotonic() - t0, "kinds": _kinds(corpus)}
    info_file.write_text(json.dumps(info, indent=2))
    return SftPolicy(path, pairs, info)


def _kinds(corpus: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in corpus:
        out[e.kind.value] = out.get(e.kind.value, 0) + 1
    return out


def train_config(arm: Arm, scale: Scale, seed: int, source: Path, out: Path, device: str) -> Any:
    """The trainer's config for one run (the env is built here, not from ``task``)."""
    from drkernel.rl.config import config_from_dict

    return config_from_dict({
        "run": {"output_dir": str(out), "steps": scale.steps, "seed": seed, "save_every": scale.steps,
                "keep_checkpoints": 1, "resume": False, "save_episodes": True, "progress": False},
        "model": {"source": str(source), "device": device},
        "rollout": {"backend": "hf", "batch_size": 256, "prompts_per_step": scale.prompts_per_step,
                    "samples_per_prompt": scale.samples_per_prompt, "turns": scale.turns,
                    "max_tokens": scale.max_tokens, "temperature": 1.0, "top_p": 1.0},
        "eval": eval_config(scale, device).to_dict(),
        "reward": {"coverage_weight": 0.5 if arm.pr else 0.0},
        "task": {"kind": "organism", "problems": f"train:{scale.n_train}:{','.join(scale.families)}"},
        "algorithm": {"advantage": arm.advantage.value, "prs": arm.prs, "mrs": True},
        "optim": {"lr": scale.rl_lr, "mini_batches": scale.mini_batches, "micro_batch_rows": 64},
    })


def eval_config(scale: Scale, device: str) -> EvalConfig:
    """The gym's settings of a scale on ``device``; the seed stays None, so every evaluation draws its
    trial seeds secretly (the policy cannot fit them)."""
    return EvalConfig(device=Device.parse(device, "--device").guess(), **scale.gym)


def _heldout(env: OrganismEnv, trainer: Any, scale: Scale, seed: int, stages: dict[str, float],
             name: str) -> dict[str, float]:
    if not scale.n_heldout:
        return {}
    t0 = time.monotonic()
    try:
        return _heldout_metrics(env, trainer, scale, seed)
    finally:
        stages[name] = time.monotonic() - t0


def _heldout_metrics(env: OrganismEnv, trainer: Any, scale: Scale, seed: int) -> dict[str, float]:
    from drkernel.agent.policies.hf_local import HFLocalPolicy

    policy = HFLocalPolicy(trainer.model, trainer.tokenizer, batch_size=256)
    problems = load_split(f"heldout:{scale.n_heldout}", scale.problems_of(seed))
    return asyncio.run(env.evaluate(policy, problems, scale.heldout_samples))


def run_arm(arm: Arm, scale: Scale, seed: int, out_dir: Path, device: str, evaluator: Any,
            cache: EvalCache, cache_dir: Path, core_evaluator: Any = None,
            gym_start_s: float = 0.0) -> dict[str, Any]:
    """One (arm, seed) run; returns and writes ``<out_dir>/<arm>-s<seed>/organism_run.json``.
    ``evaluator`` runs the gym's full checks; ``core_evaluator`` only its core checks (the reward of an
    arm with the hack checks off); ``gym_start_s``: what starting them took (`stage_breakdown`)."""
    from drkernel.agent.policies.base import SamplingParams
    from drkernel.devices import resolve
    from drkernel.rl.trainer import Trainer

    t_start = time.monotonic()
    p0 = prepare_policy(scale, seed, cache_dir, resolve(device, "--device"))
    stages: dict[str, float] = {}
    before = _counters(cache)
    run_dir = out_dir / f"{arm.name}-s{seed}"
    cfg = train_config(arm, scale, seed, p0.path, run_dir, device)
    problems = load_split(cfg.task.problems, scale.problems_of(seed))
    gym = cfg.eval
    settings = EnvSettings(prompts_per_step=scale.prompts_per_step,
                           samples_per_prompt=scale.samples_per_prompt, turns=scale.turns,
                           integrity=arm.integrity, reward=cfg.reward,
                           eval_config=gym, seed=seed, corpus=p0.corpus, stop_p=scale.stop_p)
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=scale.max_tokens)
    env = OrganismEnv(problems, evaluator, settings, sampling, cache, core_evaluator=core_evaluator)
    device_turn = cache.turns.shared if cache.turns is not None else nullcontext
    with device_turn():  # the policy moves to the device
        trainer = Trainer(cfg, env=env)
    stages["setup"] = time.monotonic() - t_start
    try:
        with device_turn():
            heldout_before = _heldout(env, trainer, scale, seed, stages, "heldout_before")
        history, t0 = [], time.monotonic()
        while trainer.step < scale.steps:
            with device_turn():  # sampling and training share the device; the gym's turns are exclusive
                history.append(trainer.train_step())
            log.info("%s seed %d step %d: reward %.3f hack %.2f lazy %.2f", arm.name, seed, trainer.step,
                     history[-1].get("gym/org/reward_mean", 0), history[-1].get("gym/org/hack_rate", 0),
                     history[-1].get("gym/org/lazy_rate", 0))
            if scale.budget_s and time.monotonic() - t0 > scale.budget_s:
                break
        rl_s = time.monotonic() - t0
        with device_turn():
            heldout_after = _heldout(env, trainer, scale, seed, stages, "heldout_after")
    finally:
        t_close = time.monotonic()
        trainer.close()
        stages["close"] = time.monotonic() - t_close
    result = {"schema": SCHEMA, "arm": arm.name, "arm_description": arm.description, "expect": arm.expect,
              "seed": seed, "scale": scale.to_dict(), "device": device,
              "gym_device": gym.device, "device_name": _device_name(cache), "sft": p0.info,
              "problems": [p.name for p in problems], "steps": history, "steps_done": len(history),
              "stopped_early": len(history) < scale.steps, "rl_seconds": rl_s,
              "wall_seconds": time.monotonic() - t_start, "heldout_before": heldout_before,
              "heldout_after": heldout_after, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "stages": stage_breakdown(p0.info, gym_start_s, stages, history, before, _counters(cache),
                                        time.monotonic() - t_start)}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "organism_run.json").write_text(json.dumps(result, indent=1))
    return result


def _counters(cache: EvalCache) -> dict[str, float]:
    """The cumulative counters a run's stage breakdown is the difference of."""
    turns = cache.turns.stats.to_dict() if cache.turns is not None else {}
    return ({"evaluations_n": float(cache.evaluations), "evaluate_s": cache.seconds,
             "wait_others_s": cache.waited_s}
            | {f"turns/{k}": v for k, v in turns.items()}
            | {f"gym/{k}": v for k, v in cache.stage_seconds.items()})


GYM_STAGES = ("candidate", "child_wait", "judge_compare", "timing_lock_wait", "exclusive", "reference_timing")
"""The gym's stage seconds (summed over a run's evaluations) its breakdown keeps."""


def stage_breakdown(sft: dict[str, Any], gym_start_s: float, stages: dict[str, float],
                    history: Sequence[dict[str, float]], before: dict[str, float], after: dict[str, float],
                    wall_s: float) -> dict[str, float]:
    """Where a run's wall time went, in seconds (the run's JSON ``stages``; the claims SUMMARY prints it).

    ``sft``: the seed's SFT (made once per seed, before its runs: not part of ``wall``); ``gym_start``:
    starting the process's evaluators (before ``wall``); ``setup``: loading the policy and building the
    trainer; ``close``: the trainer's last checkpoint; over the RL steps ``sampling`` (the policy writing turns), ``evaluations``
    (the gym judging new programs, this run's share of every run's turns included), ``wait_others``
    (programs other runs were judging), ``training`` (log-probs, advantages, update); ``heldout_*``;
    ``turns/*``: this process's waits for and holds of the device's turns (`DeviceTurns`); ``gym/*``:
    the gym's own stage seconds summed over the evaluations (they overlap: the gym runs several at once)."""
    def total(key: str) -> float:
        return float(sum(h.get(key, 0.0) for h in history))

    out = {"sft": float(sft.get("seconds", 0.0)), "gym_start": gym_start_s, **stages,
           "rl": total("perf/step_s"), "sampling": total("gym/org/sample_s"),
           "evaluations": total("gym/org/eval_s"), "wait_others": total("gym/org/eval_wait_s"),
           "training": total("perf/score_s") + total("perf/update_s"), "wall": wall_s}
    keep = {k for k in after if not k.startswith("gym/")} | {f"gym/{k}" for k in GYM_STAGES}
    out |= {k: after.get(k, 0.0) - before.get(k, 0.0) for k in sorted(keep) if k in after}
    return {k: round(v, 3) for k, v in out.items()}


def _device_name(cache: EvalCache) -> str:
    for r in cache.results.values():
        if r.device_name:
            return r.device_name
    return ""


def run_suite(arms: Sequence[Arm], seeds: Sequence[int], scale: Scale, out_dir: Path, device: str,
              cache_dir: Path | None = None, bundle: Path | None = None,
              turns: Path | None = None, gym_concurrency: int | None = None) -> list[dict[str, Any]]:
    """Every (seed, arm) pair with one verdict cache and one evaluator per checks setting (the full
    checks; the core checks only when an arm turns the hack checks off). ``organism_suite.json`` (and
    its copy ``bundle``) is rewritten after every run (`write_bundle`), so a suite killed at a time
    limit keeps its finished runs. ``turns``: the lock file of runs sharing the device from other
    processes (`drkernel.organism.turns`): the evaluators then take it around their timed regions
    (``device_lock``), share reference timings through ``cache_dir``, and keep one judge and one warm
    candidate each.
    ``gym_concurrency``: evaluations at once per evaluator (default 8 on a GPU, 2 on CPU)."""
    from contextlib import ExitStack

    from drkernel.gym import InProcessEvaluator
    from drkernel.gym.checks import core_checks

    out_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = cache_dir or out_dir / "cache"
    gym = eval_config(scale, device)
    cuda = gym.device != "cpu"
    device_turns = DeviceTurns(turns) if turns is not None else None
    cache = EvalCache(cache_dir / f"verdicts-{scale.name}.jsonl", device_turns)
    runs: list[dict[str, Any]] = []
    threads = torch.get_num_threads()
    if scale.torch_threads:
        torch.set_num_threads(scale.torch_threads)
    # runs in parallel processes each start a gym: one warm candidate each keeps 8 gyms in memory
    sizes: dict[str, Any] = {"concurrency": gym_concurrency or (8 if cuda else 2),
                             "pool_size": 1 if turns else (4 if cuda else 2)}
    if device_turns is not None:
        # one judge each: a gym judging 2 programs at once does not queue on it (CUDA_JUDGES is for 8)
        sizes |= {"device_lock": device_turns, "reference_cache_dir": str(cache_dir / "reference-timings"),
                  "judges": 1}
    try:
        with ExitStack() as stack:
            t0 = time.monotonic()
            ev = stack.enter_context(InProcessEvaluator(device=gym.device, **sizes))
            core = (stack.enter_context(InProcessEvaluator(device=gym.device, checks=core_checks(), **sizes))
                    if any(not a.integrity for a in arms) else None)
            for evaluator in (ev, core) if core is not None else (ev,):
                evaluator.device_info()  # waits until the gym has started
            gym_start_s = time.monotonic() - t0
            for seed in seeds:
                for a in arms:
                    runs.append(run_arm(a, scale, seed, out_dir, device, ev, cache, cache_dir, core,
                                        gym_start_s))
                    gym_start_s = 0.0  # the next run of this process found the gym started
                    log.info("%s seed %d done in %.0f s (%d steps)", a.name, seed, runs[-1]["wall_seconds"],
                             runs[-1]["steps_done"])
                    paths = [out_dir / "organism_suite.json"] + ([bundle] if bundle else [])
                    write_bundle(runs, cache, paths)
    finally:
        torch.set_num_threads(threads)
        if device_turns is not None:
            device_turns.close()
    return runs


def write_bundle(runs: Sequence[dict[str, Any]], cache: EvalCache, paths: Sequence[Path]) -> None:
    """Write the suite's runs to each of ``paths`` so that no reader ever sees a partial bundle.

    Each file is replaced in one step (a temporary file next to it, then ``os.replace``): a copy
    taken, or a section killed, while the next run is in flight gets the previous complete bundle,
    never a torn or half-updated one. Runs already in the file from an
    earlier call of the same section at the same scale (a killed one re-run) are kept unless this suite
    ran the same (arm, seed) again, which then replaces them; runs at another scale are dropped."""
    mine = {(r["arm"], int(r["seed"])) for r in runs}
    scales = [r.get("scale") for r in runs]
    for path in paths:
        earlier = [r for r in _bundle_runs(path) if (r["arm"], r["seed"]) not in mine
                   and r.get("scale") in scales]
        text = json.dumps({"schema": "organism-suite/1", "runs": earlier + list(runs),
                           "evaluations": cache.evaluations, "eval_seconds": cache.seconds}, indent=1)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


def _bundle_runs(path: Path) -> list[dict[str, Any]]:
    """The runs of an existing bundle (none when it is absent or unreadable: it is then rewritten)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list):
        return []
    return [r for r in runs if isinstance(r, dict) and "arm" in r and isinstance(r.get("seed"), int)]
