"""The single-node Dr. Kernel RL trainer: rollout() -> score() -> advantages() -> update() -> log().

One step (paper Sec. 4-6):

1. rollout: the agent runs prompts_per_step x samples_per_prompt episodes of up to T turns with the
   current weights; each turn becomes a row (prompt tokens + sampled tokens + rollout log-probs).
2. score: per-turn rewards (profiling reward, PR); the trainer recomputes the old log-probs; masks:
   void turns, mismatch rejection (MRS), profiling rejection (PRS), optional dynamic sampling.
3. advantages: reward-to-go, then TRLOO over (prompt, turn) groups; rejected rows stay in the baseline.
4. update: PPO clip (asymmetric, dual clip), token-sum per row / mean over rows, AdamW, gradient
   clipping and accumulation; then the new weights are pushed to the rollout engine.
5. log: metrics to JSONL (+ TensorBoard / W&B), checkpoint every ``save_every`` steps.

The algorithm is the pure functions of ``drkernel.rl``; this module only drives them. Under torchrun
(or ``drkernel train --nproc N``) the same loop runs data parallel on N ranks: whole prompt groups per
rank, gradients summed across ranks before each optimizer step, metrics reduced, rank 0 writing
(drkernel.rl.distributed).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from drkernel.rl import advantages as adv_fns
from drkernel.rl.checkpoint import latest_checkpoint, load_trainer_state, save_checkpoint
from drkernel.rl.config import TrainConfig
from drkernel.rl.distributed import DistContext, init_from_env, localize, reduce_metrics
from drkernel.rl.engines import build_engine
from drkernel.rl.envs import RolloutEnv, StepRollout
from drkernel.rl.logprobs import completion_logprobs
from drkernel.rl.losses import ppo_policy_loss
from drkernel.rl.masks import void_turn_mask
from drkernel.rl.metrics_log import MetricsLogger, ProgressDisplay, truncate_jsonl
from drkernel.rl.mismatch import importance_weights, mismatch_rejection, mismatch_stats
from drkernel.devices import resolve
from drkernel.rl.modeling import load_model
from drkernel.rl.rejection import prs_keep_mask, prs_keep_probability, zero_variance_groups
from drkernel.rl.returns import reward_to_go
from drkernel.rl.rewards import reward_stats
from drkernel.rl.rows import Rows, collate

log = logging.getLogger(__name__)


@dataclass
class Scored:
    """A step's rows with everything the update needs. R rows, C completion columns."""

    rows: Rows
    old_logp: torch.Tensor
    """[R, C] trainer log-probs before the update (the PPO ratio's denominator)."""
    advantages: torch.Tensor
    """[R, C] advantage per token, times the truncated importance weight when enabled."""
    loss_rows: torch.Tensor
    """[R] bool, rows in the loss (not void, not rejected by MRS / PRS / dynamic sampling)."""
    metrics: dict[str, float]


EnvFactory = Callable[[TrainConfig, Any, Any, Any, DistContext], RolloutEnv]
"""Builds a run's env from its config, sampling parameters, model, tokenizer and rank
(`drkernel.tasks.build_env` for every task of the config; the organism's driver passes an env)."""


class Trainer:
    """Owns the model, optimizer, rollout engine, environment and logs of one run (of one rank)."""

    def __init__(self, config: TrainConfig, env: RolloutEnv | EnvFactory) -> None:
        """``env``: the env to train on, or a factory called once the model exists (`EnvFactory`)."""
        from drkernel.agent.policies.base import SamplingParams

        self.dist = init_from_env(config)
        self.out = Path(config.run.output_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        if self.dist.is_main:
            (self.out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
        config = localize(config, self.dist)
        self.config = config
        self.device = resolve(config.model.device, "model.device")
        checkpoint = latest_checkpoint(self.out) if config.run.resume else None
        torch.manual_seed(config.run.seed)  # the same initial weights on every rank
        self.model, self.tokenizer = load_model(config.model, self.device, checkpoint)
        self.weights_fingerprint = self.dist.check_same_weights(self.model)
        """Digest of the weights, checked equal on every rank after each step's update ("" in one process)."""
        o = config.optim
        self.optimizer = torch.optim.AdamW(
            [p for p in self.model.parameters() if p.requires_grad],
            lr=o.lr,
            betas=o.betas,
            eps=o.eps,
            weight_decay=o.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda i: min(1.0, (i + 1) / o.warmup_steps) if o.warmup_steps else 1.0
        )
        self.step = load_trainer_state(checkpoint, self.optimizer, self.scheduler) if checkpoint else 0
        if checkpoint:
            log.info("resumed from %s at step %d", checkpoint, self.step)
        self.sampling = SamplingParams(
            temperature=config.rollout.temperature,
            top_p=config.rollout.top_p,
            max_tokens=config.rollout.max_tokens,
        )
        self.engine = build_engine(config, self.model, self.tokenizer)
        self.env = env(config, self.sampling, self.model, self.tokenizer, self.dist) if callable(env) else env
        self._loop = asyncio.new_event_loop()  # one loop for the run: policies keep connections across steps
        self.logger = None
        if self.dist.is_main:
            truncate_jsonl(self.out / "episodes.jsonl", self.step)
            self.logger = MetricsLogger(
                self.out, self.step, config.run.tensorboard, config.run.wandb_project, config.to_dict()
            )

    # -- the straight line -------------------------------------------------------------------

    def train(self) -> list[dict[str, float]]:
        """Run until ``run.steps`` steps are done; returns the metrics of the steps run now."""
        history = []
        progress = ProgressDisplay(
            self.config.run.steps, self.step, self.config.run.progress and self.dist.is_main
        )
        try:
            while self.step < self.config.run.steps:
                metrics = self.train_step()
                history.append(metrics)
                progress.update(self.step, metrics)
        finally:
            progress.close()
        return history

    def train_step(self) -> dict[str, float]:
        """One step: rollout -> score -> advantages -> update -> log."""
        t0 = time.perf_counter()
        torch.manual_seed(self.dist.seed(self.config.run.seed * 1_000_003 + self.step))  # sampling noise
        batch = self.rollout()
        t1 = time.perf_counter()
        scored = self.score(batch)
        t2 = time.perf_counter()
        update_metrics = self.update(scored)
        self.push()
        t3 = time.perf_counter()
        self.step += 1
        rows = scored.rows
        local = {
            **batch.metrics,
            **scored.metrics,
            "perf/rollout_s": t1 - t0,
            "perf/score_s": t2 - t1,
            "perf/update_s": t3 - t2,
            "perf/step_s": t3 - t0,
            "perf/completion_tokens": float(rows.completion_mask.sum().item()),
            "perf/train_tokens": float(rows.attention_mask.sum().item()),
            "perf/evaluations": float(batch.evaluations),
        }
        metrics = reduce_metrics(self.dist, local, weight=len(rows))
        metrics.update(self.reward_metrics(rows))
        metrics.update(update_metrics)
        rollout_s = max(metrics["perf/rollout_s"], 1e-9)
        train_s = max(metrics["perf/score_s"] + metrics["perf/update_s"], 1e-9)
        metrics["perf/tokens_per_s"] = metrics["perf/completion_tokens"] / rollout_s
        metrics["perf/train_tokens_per_s"] = metrics["perf/train_tokens"] / train_s
        metrics["perf/evals_per_s"] = metrics["perf/evaluations"] / rollout_s
        self.log(metrics, batch)
        return metrics

    def reward_metrics(self, rows: Rows) -> dict[str, float]:
        """Reward statistics over the whole step (every rank's rows)."""
        parts = self.dist.gather([rows.reward.cpu(), rows.correct.cpu(), rows.hacked.cpu()])
        reward, correct, hacked = (torch.cat([p[i] for p in parts]) for i in range(3))
        return reward_stats(reward, correct, hacked).to_metrics()

    def push(self) -> None:
        """Bring the rollout engine the new weights; one server for all ranks is updated by rank 0 while
        the others wait, a per-rank engine by its rank. Then check that the ranks agree."""
        shared_server = self.config.rollout.backend == "openai"
        if self.dist.is_main or not shared_server:
            self.engine.push()
        if shared_server:
            self.dist.barrier()
        self.weights_fingerprint = self.dist.check_same_weights(self.model)

    def rollout(self) -> StepRollout:
        """Sample this step's trajectories with the current weights."""
        self.model.eval()
        return self._loop.run_until_complete(self.env.rollout(self.engine.policy, self.step))

    def score(self, batch: StepRollout) -> Scored:
        """Rewards, trainer log-probs and the loss masks (void, MRS, PRS, dynamic sampling)."""
        a = self.config.algorithm
        rows = collate(batch.records, self.tokenizer.pad_token_id).to(self.device)
        old_logp = self.logprobs(rows)  # (R, C)
        mask = rows.completion_mask
        metrics: dict[str, float] = {}

        in_group = (
            void_turn_mask(rows.reward, rows.traj, rows.turn) if a.void_turns else torch.ones_like(mask[:, 0])
        )
        mrs_keep = mismatch_rejection(
            old_logp, rows.rollout_logprobs, mask, rows.traj, a.mrs_low, a.mrs_high, a.token_veto
        )
        metrics.update(mismatch_stats(old_logp, rows.rollout_logprobs, mask, mrs_keep).to_metrics())
        if not a.mrs:
            mrs_keep = torch.ones_like(mrs_keep)
        prs_p = prs_keep_probability(
            rows.coverage,
            rows.correct,
            rows.hacked,
            rows.traj,
            a.prs_mode,
            speedup=rows.speedup,
            always_keep_speedup=a.prs_always_keep_speedup,
            threshold=a.prs_threshold,
            ramp=a.prs_ramp,
        )
        generator = torch.Generator(device=self.device).manual_seed(
            self.dist.seed(self.config.run.seed * 7919 + self.step)
        )
        prs_keep = prs_keep_mask(prs_p, generator) if a.prs else torch.ones_like(mrs_keep)
        flat = (
            zero_variance_groups(rows.reward, rows.group)
            if a.dynamic_sampling
            else torch.zeros_like(mrs_keep)
        )
        loss_rows = in_group & mrs_keep & prs_keep & ~flat & mask.any(dim=1)
        metrics.update(
            {
                "loss/void_fraction": (~in_group).float().mean().item(),
                "loss/prs_rejected_fraction": (~prs_keep).float().mean().item(),
                "loss/zero_variance_fraction": flat.float().mean().item(),
                "loss/rows": float(len(rows)),
                "loss/rows_in_loss": float(loss_rows.sum().item()),
            }
        )
        return self.advantages(rows, old_logp, in_group, loss_rows, metrics)

    def advantages(
        self,
        rows: Rows,
        old_logp: torch.Tensor,
        in_group: torch.Tensor,
        loss_rows: torch.Tensor,
        metrics: dict[str, float],
    ) -> Scored:
        """Reward-to-go and TRLOO (or GRPO) over (prompt, turn) groups; optional IS weights per token."""
        a = self.config.algorithm
        returns = reward_to_go(rows.reward, rows.traj, rows.turn, a.gamma)
        estimator = adv_fns.trloo_advantages if a.advantage == "trloo" else adv_fns.grpo_advantages
        adv = estimator(returns, rows.group, rows.turn, group_mask=in_group)  # (R,)
        token_adv = adv.unsqueeze(-1).expand_as(old_logp)  # (R, C)
        if a.is_level is not None:
            weights = importance_weights(
                old_logp, rows.rollout_logprobs, rows.completion_mask, rows.traj, a.is_level, a.is_upper
            )
            token_adv = token_adv * weights
            metrics["mismatch/is_weight_mean"] = weights[rows.completion_mask].mean().item()
        metrics["reward/advantage_abs_mean"] = adv[in_group].abs().mean().item() if in_group.any() else 0.0
        metrics["reward/return_mean"] = returns.mean().item()
        return Scored(
            rows=rows, old_logp=old_logp, advantages=token_adv, loss_rows=loss_rows, metrics=metrics
        )

    def update(self, scored: Scored) -> dict[str, float]:
        """PPO epochs over mini-batches of the rows in the loss, accumulating micro-batch gradients.
        With several ranks every rank makes the same number of optimizer steps (a rank with fewer rows
        gets empty mini-batches) on the gradients summed over ranks."""
        o, a = self.config.optim, self.config.algorithm
        index = torch.nonzero(scored.loss_rows).squeeze(-1).cpu()
        most = int(self.dist.reduce_scalar(index.numel(), "max"))
        if most == 0:
            return {"loss/skipped": 1.0}
        # Eval mode keeps dropout off, so the first mini-batch's ratio is exactly 1; gradient
        # checkpointing is only active in train mode.
        self.model.train(self.config.model.gradient_checkpointing)
        generator = torch.Generator().manual_seed(self.dist.seed(self.config.run.seed * 104_729 + self.step))
        trained = [p for p in self.model.parameters() if p.requires_grad]
        sums: dict[str, float] = {}
        updates = 0
        for _ in range(o.epochs):
            order = index[torch.randperm(index.numel(), generator=generator)]
            for mini in order.tensor_split(min(o.mini_batches, most)):
                stats = self.dist.sum_metrics(self._accumulate(scored, mini, a))
                self.dist.all_reduce_grads(trained)
                norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), o.grad_clip)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                stats["loss/grad_norm"] = float(norm)
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + v
                updates += 1
        self.model.eval()
        out = {k: v / updates for k, v in sums.items()}
        out.update(
            {"loss/skipped": 0.0, "loss/lr": self.scheduler.get_last_lr()[0], "loss/optimizer_steps": updates}
        )
        return out

    def _accumulate(self, scored: Scored, mini: torch.Tensor, a: Any) -> dict[str, float]:
        """Backward over one mini-batch in micro-batches; each micro-batch's loss is scaled by its share
        of the mini-batch over all ranks (rows for the per-row aggregations, tokens for token-mean)."""
        by_tokens = a.loss_agg == "token-mean"
        mask = scored.rows.completion_mask
        sizes = mask[mini].sum(dim=1) if by_tokens else torch.ones(mini.numel(), device=mask.device)
        total = self.dist.reduce_scalar(sizes.sum().item())
        stats: dict[str, float] = {}
        for micro in mini.split(self.config.optim.micro_batch_rows) if mini.numel() else ():
            sub = scored.rows.select(micro.to(self.device))
            cols = sub.completion_ids.shape[1]
            logp = self.logprobs(sub, grad=True)  # (r, c)
            loss, s = ppo_policy_loss(
                logp,
                scored.old_logp[micro, -cols:],
                scored.advantages[micro, -cols:],
                sub.completion_mask,
                a.clip_low,
                a.clip_high,
                a.dual_clip,
                a.loss_agg,
            )
            share = (sub.completion_mask.sum().item() if by_tokens else micro.numel()) / total
            (loss * share).backward()
            for k, v in s.to_metrics().items():
                stats[k] = stats.get(k, 0.0) + (v * share if k != "loss/num_tokens" else v)
        return stats

    def logprobs(self, rows: Rows, grad: bool = False) -> torch.Tensor:
        """Trainer log-probs of ``rows``' completions ([R, C]); without ``grad`` in micro-batches."""
        temperature, precision = self.config.rollout.temperature, self.config.model.precision
        if grad:
            return completion_logprobs(self.model, rows, temperature, precision)
        out = torch.zeros_like(rows.rollout_logprobs)
        with torch.no_grad():
            for micro in torch.arange(len(rows), device=self.device).split(
                self.config.optim.micro_batch_rows
            ):
                sub = rows.select(micro)
                cols = sub.completion_ids.shape[1]
                out[micro, -cols:] = completion_logprobs(self.model, sub, temperature, precision)
        return out

    def log(self, metrics: dict[str, float], batch: StepRollout) -> None:
        """Metrics line, episodes (every rank's), and a checkpoint every ``save_every`` steps and at the
        end; written by rank 0 alone."""
        episodes = self.dist.gather(batch.episodes) if self.config.run.save_episodes else []
        if not self.dist.is_main:
            return
        self.logger.log(self.step, metrics)
        if self.config.run.save_episodes:
            with (self.out / "episodes.jsonl").open("a") as f:
                for episode in (e for part in episodes for e in part):
                    f.write(json.dumps({"step": self.step, **episode}) + "\n")
        if self.step % self.config.run.save_every == 0 or self.step == self.config.run.steps:
            self.save()

    def save(self) -> Path:
        return save_checkpoint(
            self.out,
            self.step,
            self.model,
            self.tokenizer,
            self.optimizer,
            self.scheduler,
            self.config.to_dict(),
            self.config.run.keep_checkpoints,
        )

    def close(self) -> None:
        if self.logger is not None:
            self.logger.close()
        self.env.close()
        self._loop.run_until_complete(self.engine.policy.aclose())
        self._loop.close()
        self.dist.close()


def train(config: TrainConfig, env: RolloutEnv | EnvFactory) -> list[dict[str, float]]:
    """Build a :class:`Trainer` on ``env``, run it to ``run.steps``, release everything
    (`drkernel.tasks.train` passes the config's own task)."""
    trainer = Trainer(config, env)
    try:
        return trainer.train()
    finally:
        trainer.close()
