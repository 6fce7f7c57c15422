"""Trainer configuration: frozen dataclasses, one per section, loaded from YAML by the project's one
loader (`drkernel.config`).

``load_config(path, overrides)`` reads a YAML file whose top-level keys are the sections of
:class:`TrainConfig`; ``overrides`` are ``"section.key=value"`` strings (values parsed as YAML).
Unknown keys and wrong types are errors that name the key; a choice is an enum field, so its values
are listed once, in the enum; every problem found is reported at once. The gym's settings are the
``eval`` section (`drkernel.gym.config.EvalConfig`, the same class the bench and the service read) and
the reward's the ``reward`` section (`drkernel.reward.RewardConfig`). Derived values (rows per step,
...) are properties, never written back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from drkernel.config import from_mapping, load_yaml, to_plain
from drkernel.errors import ConfigError
from drkernel.gym.config import EvalConfig
from drkernel.reward import RewardConfig
from drkernel.rl.losses import LossAgg
from drkernel.rl.mismatch import WeightLevel
from drkernel.rl.rejection import CoverageMode


class Precision(str, enum.Enum):
    """Numeric precision of the policy."""

    FP32 = "fp32"
    BF16_AUTOCAST = "bf16-autocast"
    BF16 = "bf16"


class RolloutBackend(str, enum.Enum):
    """What samples the trajectories."""

    HF = "hf"
    OPENAI = "openai"
    VLLM = "vllm"


class GymKind(str, enum.Enum):
    """Where the kernel task's evaluations run."""

    IN_PROCESS = "in_process"
    SERVICE = "service"


class TaskKind(str, enum.Enum):
    """What the policy is asked to do; each kind is one environment in `drkernel.rl.envs`."""

    KERNEL = "kernel"
    SANITY = "sanity"
    ORGANISM = "organism"


class Advantage(str, enum.Enum):
    """Advantage estimator over (prompt, turn) groups (`drkernel.rl.advantages`)."""

    TRLOO = "trloo"
    GRPO = "grpo"


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
    """Train LoRA adapters instead of the full weights."""
    r: int = 16
    """Rank of the adapters."""
    alpha: int = 32
    """Scale numerator: the adapter's update is multiplied by alpha / r."""
    dropout: float = 0.0
    """Dropout on the adapter's input."""
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    """Names of the linear layers that get adapters."""


@dataclass(frozen=True)
class ModelConfig:
    """The policy being trained."""

    source: str = "tiny"
    """``tiny`` (random-init model with a locally built tokenizer) or a Hugging Face folder / hub name."""
    tiny_hidden: int = 64
    """``tiny``: hidden size."""
    tiny_layers: int = 2
    """``tiny``: transformer layers."""
    tiny_heads: int = 4
    """``tiny``: attention heads."""
    tiny_seed: int = 0
    """``tiny``: seed of the random initial weights."""
    device: str = "auto"
    """``auto`` (cuda when available), ``cpu``, ``cuda`` or ``cuda:N``."""
    precision: Precision = Precision.FP32
    """``fp32``; ``bf16-autocast`` (fp32 weights, bf16 matmuls, CUDA only); ``bf16`` (bf16 weights)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, more compute)."""
    lora: LoraConfig = field(default_factory=LoraConfig)
    """Low-rank adapters (off by default)."""


@dataclass(frozen=True)
class RolloutConfig:
    """How trajectories are sampled."""

    backend: RolloutBackend = RolloutBackend.HF
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
    """Prompts (problems) sampled per step; the groups of TRLOO's leave-one-out baseline."""
    samples_per_prompt: int = 16
    """Trajectories per prompt (group size)."""
    turns: int = 3
    """Turns per trajectory."""
    max_tokens: int = 8192
    """Completion length limit per turn."""
    temperature: float = 1.0
    """Sampling temperature; the trainer's log-probs use the same one (log_softmax(logits / T))."""
    top_p: float = 1.0
    """Keep at 1.0 for training: rollout log-probs are those of the full tempered softmax."""
    concurrency: int = 256
    """Episodes in flight at once."""


@dataclass(frozen=True)
class GymConfig:
    """Where rewards come from (kernel task only). How a solution is evaluated is the ``eval`` section."""

    kind: GymKind = GymKind.IN_PROCESS
    """``in_process`` (this machine, on ``eval.device``) or ``service`` (a KernelGym service at ``url``)."""
    url: str = ""
    """``service``: the service's base URL (``http://host:port``)."""
    concurrency: int = 8
    """``in_process``: solutions evaluated at once."""
    pool_size: int = 4
    """``in_process``: warm candidate processes kept ready."""
    unsafe_no_sandbox: bool = False
    """``in_process``: run solutions without the OS sandbox (trusted code only; logs a loud warning)."""
    warm_references: bool = True
    """``in_process`` on a GPU: prepare the task's problems and time their references before the first
    step (`InProcessEvaluator.warm`), so no evaluation waits while a reference is timed; a problem's
    reference is timed once for the run either way."""


@dataclass(frozen=True)
class TaskConfig:
    """What the policy is asked to do."""

    kind: TaskKind = TaskKind.KERNEL
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
    """TRLOO + mismatch rejection + profiling rejection (paper Sec. 4-6); the reward is ``reward``."""

    advantage: Advantage = Advantage.TRLOO
    """``trloo`` (the paper's) or ``grpo`` (self-inclusive baseline, for comparison)."""
    gamma: float = 1.0
    """Discount of later turns' rewards in the reward-to-go."""
    clip_low: float = 0.2
    """PPO clip: the ratio is clipped below at 1 - clip_low."""
    clip_high: float = 0.28
    """PPO clip: the ratio is clipped above at 1 + clip_high (asymmetric, "clip higher")."""
    dual_clip: float = 3.0
    """Dual clip c: a negative-advantage token's loss is at most -c * A (bounds huge ratios)."""
    loss_agg: LossAgg = LossAgg.SEQ_MEAN_TOKEN_SUM
    """``token-mean``, ``seq-mean-token-sum`` (the paper's) or ``seq-mean-token-mean``."""
    void_turns: bool = True
    """Drop later non-positive turns of a trajectory that already had a positive one."""
    dynamic_sampling: bool = False
    """Drop prompts whose rewards have std < 1e-3 from the loss."""
    mrs: bool = True
    """Mismatch rejection sampling (drop trajectories whose geometric-mean ratio leaves the bounds)."""
    mrs_low: float = 0.999
    """MRS: lower bound on a trajectory's geometric-mean trainer/rollout probability ratio."""
    mrs_high: float = 1.001
    """MRS: upper bound on that ratio."""
    token_veto: float = 1e-4
    """MRS: a trajectory with any token ratio below this is dropped."""
    is_level: WeightLevel | None = None
    """Truncated importance weights on the loss: null (off), ``token``, ``turn``, ``turn-geometric``,
    ``sequence`` or ``geometric``."""
    is_upper: float = 2.0
    """Truncation bound of the importance weights."""
    prs: bool = True
    """Profiling-based rejection sampling."""
    prs_mode: CoverageMode = CoverageMode.TURN
    """``turn`` or ``trajectory-geometric``."""
    prs_threshold: float = 0.3
    """PRS: keep probability clip((coverage - threshold) / ramp, 0, 1) for a correct turn."""
    prs_ramp: float = 0.1
    """PRS: width of the ramp from keep probability 0 to 1."""
    prs_always_keep_speedup: float | None = None
    """PRS: always keep a turn whose speedup reaches this; null = off."""


@dataclass(frozen=True)
class OptimConfig:
    """AdamW and the update schedule."""

    lr: float = 1e-6
    """Peak learning rate."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW moment decays."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay."""
    eps: float = 1e-8
    """AdamW denominator epsilon."""
    grad_clip: float = 1.0
    """Clip the global gradient norm to this before each optimizer step."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up over this many optimizer steps."""
    mini_batches: int = 1
    """Optimizer steps per pass over the rollout batch. With 1 mini-batch and 1 epoch the update is
    on-policy: the PPO ratio is exactly 1 and clipping never acts."""
    epochs: int = 1
    """Passes over the rollout batch; from the second optimizer step on the ratio moves and clips."""
    micro_batch_rows: int = 4
    """Rows per forward/backward; gradients accumulate over a mini-batch."""


@dataclass(frozen=True)
class TrainConfig:
    """The whole run; see each section's class for its fields."""

    run: RunConfig = field(default_factory=RunConfig)
    """Output folder, steps, seeds, checkpoints, logging."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """The policy being trained."""
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    """How trajectories are sampled."""
    gym: GymConfig = field(default_factory=GymConfig)
    """Where the kernel task's evaluations run."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """How each solution is evaluated (the gym's own `EvalConfig`: trials, tolerance, timing, verdict
    mode, coverage floor, ...), sent with every evaluation request."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """The per-turn reward (`drkernel.reward`), scored once per turn and trained on as logged."""
    task: TaskConfig = field(default_factory=TaskConfig)
    """What the policy is asked to do."""
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    """Advantages, clipping, masks and rejection sampling."""
    optim: OptimConfig = field(default_factory=OptimConfig)
    """AdamW and the update schedule."""

    def __post_init__(self) -> None:
        problems = []
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
                f"(got {self.task.kind.value!r}, {self.task.problems!r})"
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
        """Plain values (enums by value), JSON / YAML-ready; `config_from_dict` reads it back."""
        return to_plain(self)


def _get(config: TrainConfig, dotted: str) -> Any:
    section, key = dotted.split(".")
    return getattr(getattr(config, section), key)


def config_from_dict(data: Any) -> TrainConfig:
    """A :class:`TrainConfig` from nested mappings; raises ConfigError listing every problem."""
    return from_mapping(TrainConfig, data, "train config")


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> TrainConfig:
    """Read a YAML train config, apply ``section.key=value`` overrides, validate."""
    return load_yaml(TrainConfig, path, overrides, "train config")
