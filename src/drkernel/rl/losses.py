"""PPO policy loss with asymmetric and dual clipping (paper Sec. 6, "Policy loss").

Notation: B rows (one row = one turn's response), T tokens per row; ratio
rho = exp(logp - old_logp); A the advantage; eps_low / eps_high the clip bounds; c the dual clip.
"""

import enum
from dataclasses import dataclass

import torch

from drkernel.rl.masks import masked_mean


class LossAgg(str, enum.Enum):
    """How per-token losses become one scalar."""

    TOKEN_MEAN = "token-mean"
    """Mean over every counted token of the batch."""
    SEQ_MEAN_TOKEN_SUM = "seq-mean-token-sum"
    """Sum over a row's tokens, mean over rows: the paper's choice."""
    SEQ_MEAN_TOKEN_MEAN = "seq-mean-token-mean"
    """Mean over a row's tokens, mean over rows."""


@dataclass(frozen=True)
class PolicyLossStats:
    """Detached diagnostics of one :func:`ppo_policy_loss` call, over the counted tokens."""

    loss: float
    clip_fraction: float
    """Fraction of tokens where the ratio clip is active (the clipped term is the larger loss)."""
    dual_clip_fraction: float
    """Fraction of tokens where the dual clip (-A * c, for A < 0) bounds the loss."""
    approx_kl: float
    """k3 estimator of KL(old || new): mean of (rho - 1) - log rho."""
    ratio_mean: float
    ratio_max: float
    num_tokens: int

    def to_metrics(self) -> dict[str, float]:
        """Metrics named ``loss/<field>``."""
        return {f"loss/{name}": float(value) for name, value in vars(self).items()}


def aggregate(token_loss: torch.Tensor, mask: torch.Tensor, agg: LossAgg | str) -> torch.Tensor:
    """Reduce a [B, T] per-token loss to a scalar; rows with no counted token are left out.

    Args:
        token_loss: [B, T] float.
        mask: [B, T] bool, True = the token counts.
        agg: a :class:`LossAgg` or its string value.

    Returns:
        scalar tensor; 0 (still attached to the graph) when no token counts.
    """
    agg = LossAgg(agg)
    if agg is LossAgg.TOKEN_MEAN:
        return masked_mean(token_loss, mask)
    row_counts = mask.any(dim=-1)  # (B,)
    if agg is LossAgg.SEQ_MEAN_TOKEN_SUM:
        row_loss = torch.where(mask, token_loss, torch.zeros_like(token_loss)).sum(dim=-1)  # (B,)
    else:
        row_loss = masked_mean(token_loss, mask, dim=-1)  # (B,)
    return masked_mean(row_loss, row_counts)


def ppo_policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    dual_clip: float = 3.0,
    agg: LossAgg | str = LossAgg.SEQ_MEAN_TOKEN_SUM,
    token_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, PolicyLossStats]:
    """Clipped PPO surrogate with asymmetric bounds and dual clip for negative advantages.

    l = max(-A rho, -A clip(rho, 1 - eps_low, 1 + eps_high)), then l = min(l, -A c) where A < 0
    (Sec. 6; PPO, Schulman et al. 2017; dual clip, Ye et al. 2020); then l = w l with the
    optional mismatch weights w. No KL, no entropy term.

    Args:
        logp: [B, T] float, log-probs of the sampled tokens under the policy being trained.
        old_logp: [B, T] float, the same under the policy that the advantages belong to.
        advantages: [B] (one per row) or [B, T] float.
        mask: [B, T] bool, True = the token counts.
        clip_low, clip_high: eps_low, eps_high.
        dual_clip: c > 1; ``float("inf")`` disables the dual clip.
        agg: how per-token losses are reduced, see :class:`LossAgg`.
        token_weights: [B, T] float or None, constants multiplying each token's loss, e.g. the
            truncated importance weights of :func:`drkernel.rl.mismatch.importance_weights`.

    Returns:
        ``(loss, stats)``: a scalar tensor to backpropagate and a :class:`PolicyLossStats`.
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)  # (B, 1)
    advantages = advantages.expand_as(logp)  # (B, T)
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)  # (B, T)

    # Clipped surrogate: the pessimistic (larger) of the two losses.
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clip_loss = torch.maximum(unclipped, clipped)

    # Dual clip: for A < 0 a huge ratio would make the loss unbounded; cap it at -A * c.
    dual_bound = -advantages * dual_clip
    negative = advantages < 0
    token_loss = torch.where(negative, torch.minimum(clip_loss, dual_bound), clip_loss)
    if token_weights is not None:
        token_loss = token_loss * token_weights.detach()

    loss = aggregate(token_loss, mask, agg)
    with torch.no_grad():
        ratio_counted = torch.where(mask, ratio, torch.zeros_like(ratio))
        stats = PolicyLossStats(
            loss=loss.item(),
            clip_fraction=masked_mean((clipped > unclipped).float(), mask).item(),
            dual_clip_fraction=masked_mean((negative & (clip_loss > dual_bound)).float(), mask).item(),
            approx_kl=masked_mean((ratio - 1.0) - log_ratio, mask).item(),
            ratio_mean=masked_mean(ratio, mask).item(),
            ratio_max=ratio_counted.max().item() if mask.any() else 0.0,
            num_tokens=int(mask.sum().item()),
        )
    return loss, stats
