"""Drive one organism run: SFT the policy from scratch (cached per seed and scale), then RL it with the
project's trainer (`drkernel.rl.trainer.Trainer`) on an `OrganismEnv`, and write the run's JSON.

``run_suite`` runs several (arm, seed) pairs in one process with one evaluator and one verdict cache,
so the arms of a seed start from the same SFT weights and a program is judged once for the suite.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch

from drkernel.gym.config import EvalConfig
from drkernel.organism.arms import Arm, Scale
from drkernel.organism.corpus import build_corpus
from drkernel.organism.env import EnvSettings, EvalCache, OrganismEnv
from drkernel.organism.families import load_split

log = logging.getLogger(__name__)
SCHEMA = "organism-run/1"


@dataclass(frozen=True)
class SftPolicy:
    """The SFT starting point of a seed: where it is saved and how it was made."""

    path: Path
    corpus: frozenset[tuple[str, str]]
    info: dict[str, Any]


def _fingerprint(scale: Scale, seed: int) -> str:
    keys = ("model", "families", "sft_specs", "sft_draws", "sft_steps", "sft_batch", "sft_lr")
    text = json.dumps({k: scale.to_dict()[k] for k in keys} | {"seed": seed}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def prepare_policy(scale: Scale, seed: int, cache_dir: Path, device: torch.device) -> SftPolicy:
    """Tokenizer + model trained from scratch on the bad-habits corpus; reused when already on disk."""
    from drkernel.organism import model as m

    corpus = build_corpus(scale.sft_specs, seed, families=scale.families, draws=scale.sft_draws)
    pairs = frozenset((e.messages[-1]["content"] if len(e.messages) == 1 else e.messages[0]["content"],
                       e.completion) for e in corpus)
    path = cache_dir / f"sft-{scale.model}-{seed}-{_fingerprint(scale, seed)}"
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
    gym_device = "cpu" if device == "cpu" else ("cuda" if device in ("auto", "cuda") else device)
    return EvalConfig(device=gym_device, **scale.gym)


def _heldout(env: OrganismEnv, trainer: Any, scale: Scale, seed: int) -> dict[str, float]:
    if not scale.n_heldout:
        return {}
    from drkernel.agent.policies.hf_local import HFLocalPolicy

    policy = HFLocalPolicy(trainer.model, trainer.tokenizer, batch_size=256)
    problems = load_split(f"heldout:{scale.n_heldout}", seed)
    return asyncio.run(env.evaluate(policy, problems, scale.heldout_samples))


def run_arm(arm: Arm, scale: Scale, seed: int, out_dir: Path, device: str, evaluator: Any,
            cache: EvalCache, cache_dir: Path) -> dict[str, Any]:
    """One (arm, seed) run; returns and writes ``<out_dir>/<arm>-s<seed>/organism_run.json``."""
    from drkernel.agent.policies.base import SamplingParams
    from drkernel.rl.modeling import resolve_device
    from drkernel.rl.trainer import Trainer

    t_start = time.monotonic()
    p0 = prepare_policy(scale, seed, cache_dir, resolve_device(device))
    run_dir = out_dir / f"{arm.name}-s{seed}"
    cfg = train_config(arm, scale, seed, p0.path, run_dir, device)
    problems = load_split(cfg.task.problems, seed)
    gym = cfg.eval
    settings = EnvSettings(prompts_per_step=scale.prompts_per_step,
                           samples_per_prompt=scale.samples_per_prompt, turns=scale.turns,
                           integrity=arm.integrity, reward=cfg.reward,
                           eval_config=gym, seed=seed, corpus=p0.corpus)
    sampling = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=scale.max_tokens)
    env = OrganismEnv(problems, evaluator, settings, sampling, cache)
    trainer = Trainer(cfg, env=env)
    try:
        heldout_before = _heldout(env, trainer, scale, seed)
        history, t0 = [], time.monotonic()
        while trainer.step < scale.steps:
            history.append(trainer.train_step())
            log.info("%s seed %d step %d: reward %.3f hack %.2f lazy %.2f", arm.name, seed, trainer.step,
                     history[-1].get("gym/org/reward_mean", 0), history[-1].get("gym/org/hack_rate", 0),
                     history[-1].get("gym/org/lazy_rate", 0))
            if scale.budget_s and time.monotonic() - t0 > scale.budget_s:
                break
        rl_s = time.monotonic() - t0
        heldout_after = _heldout(env, trainer, scale, seed)
    finally:
        trainer.close()
    result = {"schema": SCHEMA, "arm": arm.name, "arm_description": arm.description, "expect": arm.expect,
              "seed": seed, "scale": scale.to_dict(), "device": device,
              "gym_device": gym.device, "device_name": _device_name(cache), "sft": p0.info,
              "problems": [p.name for p in problems], "steps": history, "steps_done": len(history),
              "stopped_early": len(history) < scale.steps, "rl_seconds": rl_s,
              "wall_seconds": time.monotonic() - t_start, "heldout_before": heldout_before,
              "heldout_after": heldout_after, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "organism_run.json").write_text(json.dumps(result, indent=1))
    return result


def _device_name(cache: EvalCache) -> str:
    for r in cache.results.values():
        if r.device_name:
            return r.device_name
    return ""


def run_suite(arms: Sequence[Arm], seeds: Sequence[int], scale: Scale, out_dir: Path, device: str,
              cache_dir: Path | None = None, bundle: Path | None = None) -> list[dict[str, Any]]:
    """Every (seed, arm) pair with one evaluator and one verdict cache. ``organism_suite.json`` (and its
    copy ``bundle``) is rewritten after every run, so a suite killed at a time limit keeps its finished
    runs."""
    from drkernel.gym import InProcessEvaluator

    out_dir.mkdir(parents=True, exist_ok=True)
    cache_dir = cache_dir or out_dir / "cache"
    gym = eval_config(scale, device)
    cuda = gym.device != "cpu"
    cache = EvalCache(cache_dir / f"verdicts-{scale.name}.jsonl")
    runs = []
    threads = torch.get_num_threads()
    if scale.torch_threads:
        torch.set_num_threads(scale.torch_threads)
    try:
        with InProcessEvaluator(device=gym.device, concurrency=8 if cuda else 2,
                                pool_size=4 if cuda else 2) as ev:
            for seed in seeds:
                for a in arms:
                    runs.append(run_arm(a, scale, seed, out_dir, device, ev, cache, cache_dir))
                    log.info("%s seed %d done in %.0f s", a.name, seed, runs[-1]["wall_seconds"])
                    paths = [out_dir / "organism_suite.json"] + ([bundle] if bundle else [])
                    _write_bundle(runs, cache, paths)
    finally:
        torch.set_num_threads(threads)
    return runs


def _write_bundle(runs: Sequence[dict[str, Any]], cache: EvalCache, paths: Sequence[Path]) -> None:
    text = json.dumps({"schema": "organism-suite/1", "runs": list(runs), "evaluations": cache.evaluations,
                       "eval_seconds": cache.seconds}, indent=1)
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
