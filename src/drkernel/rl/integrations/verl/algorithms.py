"""Dr. Kernel's algorithms registered with verl's extension points.

Importing this module (verl does it in every process when ``VERL_USE_EXTERNAL_MODULES`` names it)
registers:

- advantage estimator ``trloo`` (``algorithm.adv_estimator=trloo``): turn-level REINFORCE
  leave-one-out over verl's one-row-per-trajectory layout; calls `drkernel.rl.returns.reward_to_go`,
  `drkernel.rl.masks.void_turn_mask` and `drkernel.rl.advantages.trloo_advantages`;
- policy loss ``drkernel_ppo`` (``actor_rollout_ref.actor.policy_loss.loss_mode=drkernel_ppo``): the
  asymmetric + dual-clip PPO loss of `drkernel.rl.losses.ppo_policy_loss`, rescaled to verl's global
  batch normalisation and weighted by verl's rollout importance weights;
- a driver hook around ``verl.trainer.ppo.ray_trainer.compute_advantage`` (`install_driver_hook`)
  that, for trajectories from our agent loop, writes each turn's reward on its own last token before
  the advantages, and after them applies mismatch rejection sampling (MRS,
  `drkernel.rl.mismatch.mismatch_rejection`), truncated importance weights
  (`drkernel.rl.mismatch.importance_weights`) and profiling-based rejection sampling (PRS,
  `drkernel.rl.rejection`) as zeroed loss masks. Rejected turns still count in the baselines
  (docs/METHOD.md section 6). The hook is the one place we reach into verl: its advantage functions
  receive tensors only, and per-turn rewards and coverage travel in ``non_tensor_batch``.

The hook's settings come from a YAML file named by ``DRKERNEL_VERL_CONFIG`` (fields of `HookConfig`,
its ``reward`` section included: the agent loop and the reward function score turns with it).

verl's v1 trainer (``trainer.use_v1=true``, TransferQueue) calls the estimators from its own
``_compute_advantage`` with uid, response_mask, rm_scores and log-probs only: no per-turn rewards and
no driver hook (its ``compute_advantage`` is bound at import, past our wrapper), so void turns, per-turn
credit, MRS and PRS would be skipped without a word. We run verl's v0 trainer
(``trainer.use_v1=false``, set in configs/verl/run_qwen3_8b.sh) and ``trloo`` refuses to run outside
the hook, and refuses a multi-turn batch that carries no per-turn rewards.
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping

import numpy as np
import torch

from drkernel.config import from_mapping, read_yaml_mapping, to_plain
from drkernel.errors import ConfigError
from drkernel.reward import RewardConfig
from drkernel.rl.advantages import trloo_advantages
from drkernel.rl.integrations.verl.turns import per_turn_values, place_turn_rewards, turn_layout, turn_rewards
from drkernel.rl.losses import LossAgg, ppo_policy_loss
from drkernel.rl.masks import void_turn_mask
from drkernel.rl.mismatch import WeightLevel, importance_weights, mismatch_rejection
from drkernel.rl.rejection import CoverageMode, prs_keep_mask, prs_keep_probability
from drkernel.rl.returns import reward_to_go

log = logging.getLogger(__name__)

ESTIMATOR = "trloo"
POLICY_LOSS = "drkernel_ppo"
CONFIG_ENV = "DRKERNEL_VERL_CONFIG"
# non_tensor_batch keys written by our agent loop, one list per trajectory with one value per turn
TURN_REWARDS = "drkernel_turn_rewards"
TURN_COVERAGE = "drkernel_turn_coverage"
TURN_CORRECT = "drkernel_turn_correct"
TURN_HACKED = "drkernel_turn_hacked"
TURN_SPEEDUP = "drkernel_turn_speedup"
TURN_KEYS = (TURN_REWARDS, TURN_COVERAGE, TURN_CORRECT, TURN_HACKED, TURN_SPEEDUP)


@dataclass(frozen=True)
class HookConfig:
    """Settings of the driver hook and of the reward on verl (docs/METHOD.md section 6 defaults)."""

    mrs: bool = True
    """Mismatch rejection sampling on the trainer-vs-rollout log-probs (needs rollout log-probs)."""
    mrs_low: float = 0.999
    """Lower bound on a trajectory's geometric-mean ratio."""
    mrs_high: float = 1.001
    """Upper bound on a trajectory's geometric-mean ratio."""
    token_veto: float = 1e-4
    """A turn with any token ratio below this is dropped."""
    importance_level: WeightLevel | None = None
    """Truncated importance weights (``token``, ``turn``, ``turn-geometric``, ``sequence``,
    ``geometric``) written to ``rollout_is_weights``; None leaves verl's own setting alone."""
    importance_upper: float = 2.0
    """Truncation bound of the importance weights."""
    prs: CoverageMode | None = CoverageMode.TURN
    """Profiling-based rejection sampling: ``turn``, ``trajectory-geometric`` or None (off)."""
    prs_always_keep_speedup: float | None = None
    """Always keep a turn whose speedup reaches this; None = off."""
    seed: int = 0
    """Seed of the PRS draws (advanced once per batch)."""
    reward: RewardConfig = field(default_factory=RewardConfig)
    """The per-turn reward (`drkernel.reward`) of the agent loop and the reward function: the same
    function and weights as drkernel's own trainer (its ``reward`` section) and the bench."""

    def __post_init__(self) -> None:
        problems = []
        if self.importance_level is not None and self.importance_level not in {w.value for w in WeightLevel}:
            problems.append(
                f"importance_level={self.importance_level!r} (one of {[w.value for w in WeightLevel]})"
            )
        if self.prs is not None and self.prs not in {m.value for m in CoverageMode}:
            problems.append(f"prs={self.prs!r} (one of {[m.value for m in CoverageMode]} or null)")
        if not 0 < self.mrs_low <= 1 <= self.mrs_high:
            problems.append(f"mrs_low={self.mrs_low}, mrs_high={self.mrs_high} (0 < low <= 1 <= high)")
        if problems:
            raise ConfigError("invalid verl HookConfig: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HookConfig":
        """Types checked and unknown keys named by the project's one loader (`drkernel.config`)."""
        return from_mapping(cls, d, "verl HookConfig")

    @classmethod
    def from_env(cls) -> "HookConfig":
        path = os.environ.get(CONFIG_ENV)
        if not path:
            return cls()
        return cls.from_dict(read_yaml_mapping(path, f"{CONFIG_ENV}={path}"))

    def to_dict(self) -> dict[str, Any]:
        return to_plain(self)


class _HookState(threading.local):
    """What the driver hook knows about the batch whose advantages are being computed (this thread)."""

    active: bool = False
    """Inside the hook's ``compute_advantage``."""
    per_turn: bool = False
    """The batch carried our per-turn rewards and they are on each turn's last token."""


_HOOK = _HookState()


@contextmanager
def _inside_hook(per_turn: bool) -> Iterator[None]:
    _HOOK.active, _HOOK.per_turn = True, per_turn
    try:
        yield
    finally:
        _HOOK.active, _HOOK.per_turn = False, False


def _check_turn_rewards(layout: Any) -> None:
    """Refuse what would train on the wrong credit without a word (see the module docstring)."""
    if not _HOOK.active:
        raise ConfigError(
            f"adv_estimator={ESTIMATOR} ran outside drkernel's driver hook: verl's v1 trainer "
            "(trainer.use_v1=true) passes no per-turn rewards and skips MRS and PRS; run verl's v0 "
            "trainer (trainer.use_v1=false, as configs/verl/run_qwen3_8b.sh does; docs/VERL.md)"
        )
    multi_turn = layout.num_rows > 0 and int(layout.turn.max()) > 0
    if multi_turn and not _HOOK.per_turn:
        raise ConfigError(
            f"adv_estimator={ESTIMATOR} on a multi-turn batch without per-turn rewards "
            f"(non_tensor_batch[{TURN_REWARDS!r}]): the per-turn credit and the void turns would be lost. "
            "verl's v1 trainer (trainer.use_v1=true) passes none: run trainer.use_v1=false with "
            "rollout.agent.default_agent_loop=drkernel_kernel_agent (configs/verl/run_qwen3_8b.sh)"
        )


def _group_ids(index: Any, device: torch.device) -> torch.Tensor:
    """verl's ``uid`` array (strings) -> [B] long group ids."""
    _, inverse = np.unique(np.asarray(index).astype(str), return_inverse=True)
    return torch.as_tensor(inverse.reshape(-1), dtype=torch.long, device=device)


def compute_trloo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    config: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """TRLOO advantages in verl's layout: ``(advantages, returns)``, both [B, T].

    Each turn's reward r_{i,t} is the reward on its span; G_{i,t} = sum_{k>=t} gamma^(k-t) r_{i,k};
    A_{i,t} = G_{i,t} - mean_{j != i} G_{j,t} over the trajectories of the same prompt (``index``)
    that reached turn t; void turns get A = 0 and stay out of the baselines (docs/METHOD.md section 6).
    """
    if index is None:
        raise ConfigError("adv_estimator=trloo needs verl's `uid` (prompt groups) in the batch")
    gamma = float(config.get("gamma", 1.0)) if config is not None else 1.0
    layout = turn_layout(response_mask)
    _check_turn_rewards(layout)
    reward = turn_rewards(token_level_rewards, layout)  # (R,)
    group = _group_ids(index, reward.device)[layout.traj_id]  # (R,)
    not_void = void_turn_mask(reward, layout.traj_id, layout.turn)  # (R,)
    returns = reward_to_go(reward, layout.traj_id, layout.turn, gamma)  # (R,)
    adv = trloo_advantages(returns, group, layout.turn, group_mask=not_void)  # (R,)
    adv = torch.where(not_void, adv, torch.zeros_like(adv))
    return layout.broadcast(adv).to(token_level_rewards.dtype), layout.broadcast(returns).to(
        token_level_rewards.dtype
    )


def _global_scale(mask: torch.Tensor, agg: LossAgg, info: Mapping[str, Any]) -> float:
    """Factor turning our micro-batch mean into verl's global-batch normalisation (its `agg_loss`)."""
    dp = int(info.get("dp_size") or 1)
    if agg is LossAgg.TOKEN_MEAN:
        local, total = int(mask.sum()), info.get("batch_num_tokens")
    else:
        local, total = int(mask.any(dim=-1).sum()), info.get("global_batch_size")
    if local == 0:
        return 0.0
    return local * dp / float(total) if total else float(dp)


def compute_drkernel_policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-sum",
    config: Any = None,
    rollout_is_weights: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl policy loss: `ppo_policy_loss` with clip bounds from verl's actor config.

    Importance weights w > 0 are folded into the advantages: every term of the clipped, dual-clipped
    loss is linear in A with the same sign, so loss(w A) = w loss(A) token by token.
    """
    if config is None:
        raise ConfigError(f"policy loss {POLICY_LOSS} needs verl's actor config")
    clip = config.clip_ratio
    low = config.clip_ratio_low if config.clip_ratio_low is not None else clip
    high = config.clip_ratio_high if config.clip_ratio_high is not None else clip
    agg = LossAgg(loss_agg_mode)
    if rollout_is_weights is not None:
        advantages = advantages * rollout_is_weights
    mask = response_mask.bool()
    loss, stats = ppo_policy_loss(
        log_prob,
        old_log_prob,
        advantages,
        mask,
        clip_low=low,
        clip_high=high,
        dual_clip=config.get("clip_ratio_c", 3.0),
        agg=agg,
    )
    loss = loss * _global_scale(mask, agg, getattr(config, "global_batch_info", None) or {})
    metrics = {
        "actor/pg_clipfrac": stats.clip_fraction,
        "actor/ppo_kl": stats.approx_kl,
        "actor/pg_clipfrac_lower": stats.dual_clip_fraction,
        **stats.to_metrics(),
    }
    return loss, metrics


def _turn_field(data: Any, key: str, layout: Any, fill: float = float("nan")) -> torch.Tensor:
    return per_turn_values(list(data.non_tensor_batch[key]), layout, len(data), fill)


def distribute_turn_rewards(data: Any) -> bool:
    """Write each turn's reward on its last token in ``token_level_rewards`` (in place), keeping
    anything else in it (a KL penalty) as it was; only for batches from our agent loop. Returns
    whether the batch carried per-turn rewards."""
    if TURN_REWARDS not in data.non_tensor_batch:
        return False
    batch = data.batch
    layout = turn_layout(batch["response_mask"])
    rewards = _turn_field(data, TURN_REWARDS, layout, fill=0.0)
    placed = place_turn_rewards(layout, rewards, batch["token_level_scores"].shape).to(
        batch["token_level_scores"]
    )
    batch["token_level_rewards"] = batch["token_level_rewards"] - batch["token_level_scores"] + placed
    batch["token_level_scores"] = placed
    return True


def apply_rejection(data: Any, config: HookConfig, generator: torch.Generator) -> dict[str, float]:
    """MRS, importance weights and PRS on a batch whose advantages are computed; returns metrics."""
    batch = data.batch
    layout = turn_layout(batch["response_mask"])
    keep = torch.ones(layout.num_rows, dtype=torch.bool, device=layout.traj_id.device)
    metrics: dict[str, float] = {}
    have_logps = "rollout_log_probs" in batch.keys() and "old_log_probs" in batch.keys()
    if have_logps and (config.mrs or config.importance_level):
        train, mask = layout.rows_view(batch["old_log_probs"])  # (R, T) each
        rollout, _ = layout.rows_view(batch["rollout_log_probs"])
        if config.mrs:
            mrs_keep = mismatch_rejection(
                train, rollout, mask, layout.traj_id, config.mrs_low, config.mrs_high, config.token_veto
            )
            metrics["drkernel/mrs_rejected_turns"] = (
                float((~mrs_keep).float().mean()) if mrs_keep.numel() else 0.0
            )
            keep &= mrs_keep
        if config.importance_level:
            w = importance_weights(
                train, rollout, mask, layout.traj_id, config.importance_level, config.importance_upper
            )  # (R, T)
            batch["rollout_is_weights"] = _scatter_rows(w, mask, layout, batch["response_mask"].shape)
    if config.prs and all(k in data.non_tensor_batch for k in (TURN_COVERAGE, TURN_CORRECT, TURN_HACKED)):
        speedup = (
            _turn_field(data, TURN_SPEEDUP, layout) if config.prs_always_keep_speedup is not None else None
        )
        p = prs_keep_probability(
            _turn_field(data, TURN_COVERAGE, layout),
            _turn_field(data, TURN_CORRECT, layout, 0.0).bool(),
            _turn_field(data, TURN_HACKED, layout, 0.0).bool(),
            layout.traj_id,
            mode=config.prs,
            speedup=speedup,
            always_keep_speedup=config.prs_always_keep_speedup,
        )
        prs_keep = prs_keep_mask(p.to(generator.device), generator).to(keep.device)
        metrics["drkernel/prs_rejected_turns"] = (
            float((~prs_keep).float().mean()) if prs_keep.numel() else 0.0
        )
        keep &= prs_keep
    counted = batch["response_mask"].bool()
    batch["response_mask"] = (counted & layout.token_mask(keep) | counted & (layout.row_of_token < 0)).to(
        batch["response_mask"].dtype
    )
    return metrics


def _scatter_rows(values: torch.Tensor, mask: torch.Tensor, layout: Any, shape: torch.Size) -> torch.Tensor:
    """[R, T] per-turn-row values (counted where ``mask``) -> [B, T], 1 outside the turns."""
    out = torch.ones(shape, dtype=values.dtype, device=values.device)
    rows, cols = mask.nonzero(as_tuple=True)
    out[layout.traj_id[rows], cols] = values[rows, cols]
    return out


def install_driver_hook(config: HookConfig | None = None) -> bool:
    """Wrap ``ray_trainer.compute_advantage`` once; returns False when it was already wrapped."""
    from verl.trainer.ppo import ray_trainer

    if getattr(ray_trainer.compute_advantage, "_drkernel_hook", False):
        return False
    original = ray_trainer.compute_advantage
    cfg = config or HookConfig.from_env()
    generator = torch.Generator().manual_seed(cfg.seed)

    def compute_advantage(data: Any, *args: Any, **kwargs: Any) -> Any:
        with _inside_hook(per_turn=distribute_turn_rewards(data)):
            data = original(data, *args, **kwargs)
        metrics = apply_rejection(data, cfg, generator)
        if metrics:
            log.info("drkernel rejection: %s", metrics)
            data.meta_info.setdefault("metrics", {}).update(metrics)
        return data

    compute_advantage._drkernel_hook = True  # type: ignore[attr-defined]
    ray_trainer.compute_advantage = compute_advantage
    return True


def register() -> None:
    """Register the estimator and the policy loss with verl (idempotent)."""
    from verl.trainer.ppo import core_algos

    if core_algos.ADV_ESTIMATOR_REGISTRY.get(ESTIMATOR) is not compute_trloo_advantage:
        core_algos.register_adv_est(ESTIMATOR)(compute_trloo_advantage)
    core_algos.register_policy_loss(POLICY_LOSS)(compute_drkernel_policy_loss)
