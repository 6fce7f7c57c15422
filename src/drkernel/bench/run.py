"""`drkernel bench run`: episodes over a problem set, written as they finish, then metrics.

The run folder holds ``run.json`` (the configuration), ``trajectories.jsonl`` (one episode per line,
appended as episodes finish), ``metrics.json`` and, with ``format="parquet"``, ``trajectories.parquet``.
A rerun with the same folder skips the episodes already written (resume); an episode that ended
in a policy error (the endpoint failed after its retries) is not written, so a rerun retries it.
"""

from __future__ import annotations

import enum
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drkernel.agent.episode import Episode, EpisodeConfig, episode_id, run_episodes
from drkernel.agent.policies.base import Policy, SamplingParams
from drkernel.agent.prompts import PromptTemplates
from drkernel.agent.tts import TTSConfig
from drkernel.bench.io import JsonlWriter, finished_ids, read_episodes, write_parquet
from drkernel.bench.metrics import records_from_episodes, summarize
from drkernel.config import from_mapping, merge, read_yaml_mapping, to_plain
from drkernel.errors import ConfigError
from drkernel.gym.config import LANGUAGES, EvalConfig
from drkernel.gym.protocol import Evaluator
from drkernel.problems.problem import Problem
from drkernel.reward import RewardConfig

log = logging.getLogger(__name__)
TRAJECTORIES = "trajectories.jsonl"


class TrajectoryFormat(str, enum.Enum):
    """How the trajectories are written besides the JSONL written as episodes finish."""

    JSONL = "jsonl"
    PARQUET = "parquet"


@dataclass(frozen=True)
class BenchConfig:
    """A benchmark run. Every field can be set in a YAML file (``--config``) or on the command line."""

    problems: str = "builtin"
    """Problem spec: ``builtin[:N]``, a KernelBench checkout ``[:N]``, or rows ``.jsonl/.parquet[:N]``."""
    policy: str = "scripted:builtin"
    """Policy spec (see ``drkernel.agent.policies.spec``)."""
    samples: int = 8
    """Episodes per problem."""
    turns: int = 3
    """Turns per episode (test-time scaling decides its own count)."""
    tts: str | None = None
    """Sequential test-time scaling, e.g. ``first=5,iterations=10,window=4,select=reward``."""
    history: str = "all"
    """``all`` or ``last`` (with ``history_k``)."""
    history_k: int = 1
    """Earlier turns kept by ``history=last``."""
    early_stop: str = "never"
    """``never``, ``valid`` or ``speedup``."""
    temperature: float = 1.0
    """Sampling temperature (the paper evaluates at 1.0)."""
    top_p: float = 0.95
    """Nucleus mass (the paper evaluates at 0.95)."""
    max_tokens: int = 8192
    """Completion length limit."""
    evaluator: str = "local"
    """``local`` (in-process gym) or the URL of a KernelGym service."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """How each solution is evaluated (`EvalConfig`: ``device``, ``timing``, ``tolerance``, ``trials``,
    ``verdict_mode``, ...), sent with every request."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """The per-turn reward (`drkernel.reward`), the same one training uses."""
    eval_concurrency: int = 4
    """Solutions the local gym evaluates at once."""
    unsafe_no_sandbox: bool = False
    """``local`` evaluator: run solutions without the OS sandbox (trusted code only; loud warning)."""
    concurrency: int = 64
    """Episodes in flight at once."""
    limit: int | None = None
    """Only the first N problems."""
    format: TrajectoryFormat = TrajectoryFormat.JSONL
    """``jsonl`` or ``parquet`` (parquet is written at the end, beside the JSONL)."""
    save_tokens: bool = False
    """Keep token ids and log-probs in the trajectories."""
    templates: str | None = None
    """Folder of prompt templates overriding the shipped ones."""
    language: str = "triton"
    """What the policy writes and the gym judges: ``triton`` or ``cuda`` (CUDA C++ built by
    ``load_inline``; the prompts, requests and scripted golds follow)."""
    feedback_max_chars: int = 2000
    """Feedback text limit."""

    def __post_init__(self) -> None:
        bad = []
        if self.samples < 1:
            bad.append(f"samples={self.samples} (>= 1)")
        if self.format not in {f.value for f in TrajectoryFormat}:
            bad.append(f"format={self.format!r} (one of {[f.value for f in TrajectoryFormat]})")
        if self.limit is not None and self.limit < 1:
            bad.append(f"limit={self.limit} (>= 1)")
        if self.language not in LANGUAGES:
            bad.append(f"language={self.language!r} (one of {LANGUAGES})")
        if bad:
            raise ConfigError("invalid BenchConfig: " + "; ".join(bad))
        self.episode_config()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BenchConfig:
        """Types checked and unknown keys named by the project's one loader (`drkernel.config`)."""
        return from_mapping(cls, d, "bench config")

    @classmethod
    def from_yaml(cls, path: str | Path, **overrides: Any) -> BenchConfig:
        """A YAML file of bench config keys; ``overrides`` (nested ``eval`` / ``reward`` mappings merge
        into the file's) win."""
        return cls.from_dict(merge(read_yaml_mapping(path, "bench config"), overrides))

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)

    def eval_config(self) -> EvalConfig:
        return self.eval

    def episode_config(self) -> EpisodeConfig:
        return EpisodeConfig(
            turns=self.turns,
            history=self.history,
            history_k=self.history_k,
            early_stop=self.early_stop,
            feedback_max_chars=self.feedback_max_chars,
            sampling=SamplingParams(
                temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens
            ),
            eval_config=self.eval,
            language=self.language,
            reward=self.reward,
            tts=TTSConfig.parse(self.tts) if self.tts else None,
            concurrency=self.concurrency,
        )


def select_problems(problems: Sequence[Problem], limit: int | None) -> list[Problem]:
    if not problems:
        raise ConfigError("no problems to run")
    return list(problems[:limit] if limit else problems)


def check_same_run(out: Path, config: BenchConfig) -> None:
    """A resumed run must use the configuration it started with (apart from concurrency knobs)."""
    saved_path = out / "run.json"
    if not saved_path.exists():
        return
    saved = json.loads(saved_path.read_text())["config"]
    volatile = {"concurrency", "eval_concurrency", "format", "evaluator"}
    diff = {
        k: (saved.get(k), v) for k, v in config.to_dict().items() if k not in volatile and saved.get(k) != v
    }
    if diff:
        pairs = "; ".join(f"{k}: saved {a!r} vs now {b!r}" for k, (a, b) in sorted(diff.items()))
        raise ConfigError(f"{out} holds a run with another configuration ({pairs}); use a new --out")


async def run_bench(
    config: BenchConfig,
    problems: Sequence[Problem],
    policy: Policy,
    evaluator: Evaluator,
    out: str | Path,
    on_progress: Callable[[Episode | None, int, int], None] | None = None,
) -> dict[str, Any]:
    """Run (or resume) a benchmark into ``out``; returns the metrics it also writes to metrics.json.

    ``on_progress(episode, done, total)`` is called once at the start (episode None) and after each
    episode.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    check_same_run(out, config)
    problems = select_problems(problems, config.limit)
    path = out / TRAJECTORIES
    done_ids = finished_ids(path)
    wanted = {episode_id(p, s) for p in problems for s in range(config.samples)}
    total, done = len(wanted), len(wanted & done_ids)
    (out / "run.json").write_text(json.dumps({"config": config.to_dict(), "policy": policy.name}, indent=2))
    if on_progress:
        on_progress(None, done, total)
    writer = JsonlWriter(path, tokens=config.save_tokens)
    templates = PromptTemplates.from_dir(config.templates, config.language) if config.templates else None
    t0 = time.perf_counter()
    finished = policy_errors = 0
    first_policy_error = ""

    def record(ep: Episode) -> None:
        nonlocal finished, policy_errors, first_policy_error
        if ep.stop_reason == "policy_error":  # not the model's fault: left out, so a rerun retries it
            policy_errors += 1
            first_policy_error = first_policy_error or ep.turns[-1].feedback
            log.warning(
                "%s: the policy failed (%s); a rerun retries this episode", ep.id, ep.turns[-1].feedback
            )
        else:
            writer.write(ep)
        finished += 1
        if on_progress:
            on_progress(ep, done + finished, total)

    try:
        await run_episodes(
            problems,
            policy,
            evaluator,
            config.episode_config(),
            samples=config.samples,
            templates=templates,
            skip=sorted(done_ids),
            on_episode=record,
        )
    finally:
        writer.close()
    elapsed = time.perf_counter() - t0
    episodes = [e for e in read_episodes(path) if e.id in wanted]
    metrics = summarize(records_from_episodes(episodes))
    turns = sum(len(e.turns) for e in episodes)
    metrics["run"] = {
        "policy": policy.name,
        "episodes_run_now": finished,
        "policy_errors": policy_errors,
        "first_policy_error": first_policy_error,  # the feedback of the first failed request, shown by the CLI
        "elapsed_s": elapsed,
        "episodes_per_min": 60 * finished / elapsed if elapsed > 0 and finished else None,
        "turns": turns,
        "evals": sum(1 for e in episodes for t in e.turns if t.result is not None),
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    if config.format == "parquet":
        write_parquet(episodes, out / "trajectories.parquet", tokens=config.save_tokens)
    return metrics
