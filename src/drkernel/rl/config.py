"""Trainer configuration: frozen dataclasses, one per section, loaded from YAML.

``load_config(path, overrides)`` reads a YAML file whose top-level keys are the sections of
:class:`TrainConfig`; ``overrides`` are ``"section.key=value"`` strings (values parsed as YAML).
Unknown keys and wrong types are errors that name the key; every problem found is reported at
once. Derived values (rows per step, ...) are properties, never written back.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from drkernel.errors import ConfigError


@dataclass(frozen=True)
class RunConfig:
    """Where and how long the run goes."""

    output_dir: str = "runs/train"
    """Checkpoints, metrics.jsonl and episodes land here."""
    steps: int = 10
    """RL steps (one step = one rollout batch and the updates on it)."""
    seed: int = 0
    """Seeds prompt order, sampling and PRS draws; step s uses seed + s, so a resumed run repeats them."""
    save_every: int = 10
    """Save a checkpoint every this many steps (and always after the last one)."""
    keep_checkpoints: int = 2
    """Older checkpoints are deleted; 0 keeps all."""
    resume: bool = True
    """Continue from the latest checkpoint in ``output_dir`` when there is one."""
    save_episodes: bool = True
    """Append every step's episodes (text, rewards, results) to ``episodes.jsonl``."""
    tensorboard: bool = False
    """Also write TensorBoard event files (needs the tensorboard package)."""
    wandb_project: str | None = None
    """Also log to this Weights & Biases project (needs wandb)."""
    progress: bool = True
    """Show a live progress display (rich) on a terminal."""


@dataclass(frozen=True)
class LoraConfig:
    """Low-rank adapters through peft; only the adapters are trained. Checkpoints hold the adapter; the
    rollout engine (a server, vLLM, a rollout copy) gets the merged full weights after every update."""

    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class ModelConfig:
    """The policy being trained."""

    source: str = "tiny"
    """``tiny`` (random-init model with a locally built tokenizer) or a Hugging Face folder / hub name."""
    tiny_hidden: int = 64
    tiny_layers: int = 2
    tiny_heads: int = 4
    tiny_seed: int = 0
    device: str = "auto"
    """``auto`` (cuda when available), ``cpu``, ``cuda`` or ``cuda:N``."""
    precision: str = "fp32"
    """``fp32``; ``bf16-autocast`` (fp32 weights, bf16 matmuls, CUDA only); ``bf16`` (bf16 weights)."""
    gradient_checkpointing: bool = False
    lora: LoraConfig = field(default_factory=LoraConfig)


@dataclass(frozen=True)
class RolloutConfig:
    """How trajectories are sampled."""

    backend: str = "hf"
    """``hf`` (in-process model), ``openai`` (an OpenAI-compatible server: vLLM, SGLang, ours) or ``vllm``."""
    share_weights: bool = True
    """``hf`` only: generate with the trainer's own module (no copy, nothing to push)."""
    device: str = ""
    """``hf`` without sharing: where the rollout copy lives (e.g. ``cuda:1``, so generation and training
    use different GPUs); empty = the model's device."""
    url: str = ""
    """``openai``: the server's base URL (``http://host:port/v1``)."""
    reload_path: str = "/update_weights_from_disk"
    """``openai``: POST path (relative to the server root) that loads a weights folder after each update."""
    batch_size: int = 32
    """``hf``: completions generated together."""
    prompts_per_step: int = 16
    samples_per_prompt: int = 16
    turns: int = 3
    max_tokens: int = 8192
    temperature: float = 1.0
    top_p: float = 1.0
    """Keep at 1.0 for training: rollout log-probs are those of the full tempered softmax."""
    concurrency: int = 256
    """Episodes in flight at once."""


@dataclass(frozen=True)
class GymConfig:
    """Where rewards come from (kernel task only)."""

    kind: str = "in_process"
    """``in_process`` (this machine) or ``service`` (a KernelGym service at ``url``)."""
    url: str = ""
    device: str = "auto"
    concurrency: int = 8
    pool_size: int = 4
    timing: bool = True
    profile: bool = True
    trials: int = 5
    timeout_s: float = 300.0


@dataclass(frozen=True)
class TaskConfig:
    """What the policy is asked to do."""

    kind: str = "kernel"
    """``kernel`` (write Triton kernels, rewarded by the gym), ``sanity`` (learning check, no gym) or
    ``organism`` (the miniature Dr. Kernel, drkernel.organism: programs over generated problem families)."""
    problems: str = "builtin"
    """``kernel``: ``builtin`` or a problems file / KernelBench folder (see drkernel.problems);
    ``organism``: ``<train|heldout>:<count>[:family,...]``, e.g. ``train:16``."""
    levels: tuple[int, ...] = ()
    """``kernel``: keep only these levels; empty keeps all."""
    include: tuple[str, ...] = ()
    """``kernel``: keep only problems whose key contains one of these strings; empty keeps all."""
    replay_builtin: bool = False
    """``kernel`` with ``problems: builtin``: answer with the built-in solution files teacher-forced through
    the model (drkernel.rl.replay) instead of sampling, to check the pipeline with real gym rewards."""
    sanity_target: str = "0123456789"
    """``sanity``: the characters a completion must consist of to earn reward 1."""


@dataclass(frozen=True)
class AlgorithmConfig:
    """TRLOO + mismatch rejection + profiling reward + profiling rejection (paper Sec. 4-6)."""

    advantage: str = "trloo"
    """``trloo`` (the paper's) or ``grpo`` (self-inclusive baseline, for comparison)."""
    gamma: float = 1.0
    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float = 3.0
    loss_agg: str = "seq-mean-token-sum"
    correct_weight: float = 0.5
    speedup_weight: float = 0.5
    speedup_cap: float = 3.0
    coverage_weight: float = 0.5
    """w_cov of the profiling-based reward (PR); 0 turns PR off."""
    void_turns: bool = True
    """Drop later non-positive turns of a trajectory that already had a positive one."""
    dynamic_sampling: bool = False
    """Drop prompts whose rewards have std < 1e-3 from the loss."""
    mrs: bool = True
    """Mismatch rejection sampling (drop trajectories whose geometric-mean ratio leaves the bounds)."""
    mrs_low: float = 0.999
    mrs_high: float = 1.001
    token_veto: float = 1e-4
    is_level: str = "none"
    """Truncated importance weights on the loss: ``none``, ``token``, ``turn``, ``turn-geometric``,
    ``sequence`` or ``geometric``."""
    is_upper: float = 2.0
    prs: bool = True
    """Profiling-based rejection sampling."""
    prs_mode: str = "turn"
    """``turn`` or ``trajectory-geometric``."""
    prs_threshold: float = 0.3
    prs_ramp: float = 0.1
    prs_always_keep_speedup: float | None = None


@dataclass(frozen=True)
class OptimConfig:
    """AdamW and the update schedule."""

    lr: float = 1e-6
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.01
    eps: float = 1e-8
    grad_clip: float = 1.0
    warmup_steps: int = 0
    """Linear learning-rate warm-up over this many optimizer steps."""
    mini_batches: int = 1
    """Optimizer steps per rollout batch (1 = on-policy)."""
    epochs: int = 1
    """Passes over the rollout batch."""
    micro_batch_rows: int = 4
    """Rows per forward/backward; gradients accumulate over a mini-batch."""


SECTIONS = {
    "run": RunConfig,
    "model": ModelConfig,
    "rollout": RolloutConfig,
    "gym": GymConfig,
    "task": TaskConfig,
    "algorithm": AlgorithmConfig,
    "optim": OptimConfig,
}
CHOICES = {
    "model.precision": ("fp32", "bf16-autocast", "bf16"),
    "rollout.backend": ("hf", "openai", "vllm"),
    "gym.kind": ("in_process", "service"),
    "task.kind": ("kernel", "sanity", "organism"),
    "algorithm.advantage": ("trloo", "grpo"),
    "algorithm.loss_agg": ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean"),
    "algorithm.is_level": ("none", "token", "turn", "turn-geometric", "sequence", "geometric"),
    "algorithm.prs_mode": ("turn", "trajectory-geometric"),
}


@dataclass(frozen=True)
class TrainConfig:
    """The whole run; see each section's class for its fields."""

    run: RunConfig = field(default_factory=RunConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    gym: GymConfig = field(default_factory=GymConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)

    def __post_init__(self) -> None:
        problems = [
            f"{key}={_get(self, key)!r} (one of {allowed})"
            for key, allowed in CHOICES.items()
            if _get(self, key) not in allowed
        ]
        positive = [
            "run.steps",
            "run.save_every",
            "rollout.prompts_per_step",
            "rollout.samples_per_prompt",
            "rollout.turns",
            "rollout.max_tokens",
            "rollout.batch_size",
            "optim.mini_batches",
            "optim.epochs",
            "optim.micro_batch_rows",
        ]
        problems += [f"{key}={_get(self, key)} (>= 1)" for key in positive if _get(self, key) < 1]
        if self.optim.lr <= 0 or self.optim.grad_clip <= 0:
            problems.append(
                f"optim.lr={self.optim.lr} and optim.grad_clip={self.optim.grad_clip} must be > 0"
            )
        if self.rollout.temperature <= 0:
            problems.append(f"rollout.temperature={self.rollout.temperature} (> 0: training samples)")
        if self.rollout.backend == "openai" and not self.rollout.url:
            problems.append("rollout.backend='openai' needs rollout.url")
        if self.gym.kind == "service" and not self.gym.url:
            problems.append("gym.kind='service' needs gym.url")
        if self.rollout.device and (self.rollout.backend != "hf" or self.rollout.share_weights):
            problems.append(
                f"rollout.device={self.rollout.device!r} needs rollout.backend='hf' with share_weights=False"
            )
        if self.task.replay_builtin and (self.task.kind != "kernel" or self.task.problems != "builtin"):
            problems.append(
                f"task.replay_builtin=True needs task.kind='kernel' and task.problems='builtin' "
                f"(got {self.task.kind!r}, {self.task.problems!r})"
            )
        if self.task.kind == "sanity" and self.rollout.turns != 1:
            problems.append(
                f"task.kind='sanity' is single-turn: rollout.turns={self.rollout.turns} must be 1"
            )
        if problems:
            raise ConfigError("invalid train config: " + "; ".join(problems))

    @property
    def trajectories_per_step(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.samples_per_prompt

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _get(config: TrainConfig, dotted: str) -> Any:
    section, key = dotted.split(".")
    return getattr(getattr(config, section), key)


def _coerce(value: Any, hint: Any, where: str, errors: list[str]) -> Any:
    """``value`` checked against the type ``hint`` (bool/int/float/str, Optional, tuples, sections)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _coerce(value, inner, where, errors)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where, errors)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            errors.append(f"{where}: expected a list, got {value!r}")
            return value
        inner = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        if len(inner) != len(value):
            errors.append(f"{where}: expected {len(inner)} items, got {len(value)}")
            return tuple(value)
        return tuple(_coerce(v, h, f"{where}[{i}]", errors) for i, (v, h) in enumerate(zip(value, inner)))
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):
        try:
            return float(value)  # YAML reads "1e-6" as a string
        except ValueError:
            pass
    if hint in (bool, int, str) and isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    errors.append(f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")
    return value


def _build(cls: type, data: Any, where: str, errors: list[str]) -> Any:
    if not isinstance(data, Mapping):
        errors.append(f"{where or 'config'}: expected a mapping, got {data!r}")
        return cls()
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        errors.append(f"unknown keys in {where or 'config'}: {unknown} (known: {sorted(known)})")
    values = {
        k: _coerce(v, hints[k], f"{where}.{k}".lstrip("."), errors) for k, v in data.items() if k in known
    }
    if errors:
        return None
    return cls(**values)


def config_from_dict(data: Mapping[str, Any]) -> TrainConfig:
    """A :class:`TrainConfig` from nested mappings; raises ConfigError listing every problem."""
    errors: list[str] = []
    config = _build(TrainConfig, data, "", errors)
    if errors:
        raise ConfigError("invalid train config: " + "; ".join(errors))
    return config


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``["optim.lr=1e-5", "model.lora.enabled=true"]`` applied to nested ``data`` (a copy)."""
    import yaml

    out = _deep_copy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not section.key=value")
        *parents, leaf = key.strip().split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
        node[leaf] = yaml.safe_load(raw)
    return out


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML train config, apply ``section.key=value`` overrides, validate."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise ConfigError(f"cannot read train config {path}: {e}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"train config {path} is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"train config {path}: expected a mapping of sections, got {type(data).__name__}")
    return config_from_dict(apply_overrides(data, overrides))
