import math

import pytest
import torch

from drkernel.rl.losses import LossAgg, PolicyLossStats, aggregate, ppo_policy_loss

# Four tokens in one row, old_logp = 0 so that ratio = exp(logp); eps_low 0.2, eps_high 0.28, c 3.
#   A = +1, ratio 1.5: max(-1.5, -1.28) = -1.28   ratio clip active (gradient 0)
#   A = +1, ratio 0.5: max(-0.5, -0.8)  = -0.5    unclipped
#   A = -1, ratio 0.5: max( 0.5,  0.8)  =  0.8    ratio clip active (gradient 0)
#   A = -1, ratio 5.0: max( 5.0,  1.28) =  5.0 -> min(5.0, 3) = 3   dual clip (gradient 0)
RATIOS = torch.tensor([[1.5, 0.5, 0.5, 5.0]])
ADV = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
TOKEN_LOSS = [-1.28, -0.5, 0.8, 3.0]


def _hand_case():
    logp = RATIOS.log().requires_grad_()
    return logp, torch.zeros_like(logp), ADV, torch.ones_like(logp, dtype=torch.bool)


def test_hand_worked_token_losses_and_gradient():
    logp, old_logp, adv, mask = _hand_case()
    loss, stats = ppo_policy_loss(logp, old_logp, adv, mask, agg="seq-mean-token-sum")
    # One row: token sum = -1.28 - 0.5 + 0.8 + 3 = 2.02.
    torch.testing.assert_close(loss, torch.tensor(sum(TOKEN_LOSS)))
    loss.backward()
    # Only the unclipped token has a gradient: d(-A rho)/d logp = -A rho = -1 * 0.5.
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -0.5, 0.0, 0.0]]))
    assert stats.clip_fraction == pytest.approx(2 / 4)  # tokens 0 and 2
    assert stats.dual_clip_fraction == pytest.approx(1 / 4)  # token 3
    assert stats.ratio_max == pytest.approx(5.0)
    assert stats.num_tokens == 4
    # k3: mean of (rho - 1 - log rho) over the four ratios.
    k3 = sum(r - 1 - math.log(r) for r in (1.5, 0.5, 0.5, 5.0)) / 4
    assert stats.approx_kl == pytest.approx(k3, rel=1e-5)


def test_dual_clip_off_with_infinity():
    logp, old_logp, adv, mask = _hand_case()
    loss, stats = ppo_policy_loss(logp, old_logp, adv, mask, dual_clip=float("inf"))
    # Token 3 keeps its 5.0: -1.28 - 0.5 + 0.8 + 5 = 4.02.
    torch.testing.assert_close(loss, torch.tensor(4.02))
    assert stats.dual_clip_fraction == 0.0


def test_token_weights_scale_each_token():
    # Weights (2, 1, 0, 0.5) on the hand case: 2*(-1.28) - 0.5 + 0 + 0.5*3 = -1.56; the gradient of
    # the unclipped token is unchanged (weight 1), the weights themselves get none.
    logp, old_logp, adv, mask = _hand_case()
    weights = torch.tensor([[2.0, 1.0, 0.0, 0.5]], requires_grad=True)
    loss, _ = ppo_policy_loss(logp, old_logp, adv, mask, token_weights=weights)
    torch.testing.assert_close(loss, torch.tensor(-1.56))
    loss.backward()
    torch.testing.assert_close(logp.grad, torch.tensor([[0.0, -0.5, 0.0, 0.0]]))
    assert weights.grad is None


def test_aggregation_modes_hand_worked():
    # Row 0 counts (1, 2, 3), row 1 counts (4) only, row 2 counts nothing (a rejected turn).
    token_loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0], [7.0, 7.0, 7.0]])
    mask = torch.tensor([[True, True, True], [True, False, False], [False, False, False]])
    # token-mean: (1+2+3+4)/4 = 2.5.  seq-mean-token-sum: (6 + 4)/2 = 5.
    # seq-mean-token-mean: (2 + 4)/2 = 3.  The empty row is in no denominator.
    torch.testing.assert_close(aggregate(token_loss, mask, LossAgg.TOKEN_MEAN), torch.tensor(2.5))
    torch.testing.assert_close(aggregate(token_loss, mask, "seq-mean-token-sum"), torch.tensor(5.0))
    torch.testing.assert_close(aggregate(token_loss, mask, "seq-mean-token-mean"), torch.tensor(3.0))


def test_unknown_aggregation_is_an_error():
    logp, old_logp, adv, mask = _hand_case()
    with pytest.raises(ValueError):
        ppo_policy_loss(logp, old_logp, adv, mask, agg="token-sum")


def test_row_advantages_broadcast_like_token_advantages():
    g = torch.Generator().manual_seed(0)
    logp, old_logp = torch.randn(2, 3, 5, generator=g) * 0.3
    adv = torch.randn(3, generator=g)
    mask = torch.rand(3, 5, generator=g) > 0.3
    row, _ = ppo_policy_loss(logp, old_logp, adv, mask)
    token, _ = ppo_policy_loss(logp, old_logp, adv[:, None].expand(3, 5), mask)
    torch.testing.assert_close(row, token)


def test_nothing_counted_gives_zero_loss_with_a_graph():
    logp = torch.zeros(2, 3, requires_grad=True)
    loss, stats = ppo_policy_loss(logp, torch.zeros(2, 3), torch.ones(2), torch.zeros(2, 3, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0 and stats.num_tokens == 0
    assert torch.equal(logp.grad, torch.zeros(2, 3))


def test_on_policy_stats():
    logp = torch.full((2, 4), -1.0)
    _, stats = ppo_policy_loss(
        logp, logp.clone(), torch.tensor([1.0, -1.0]), torch.ones(2, 4, dtype=torch.bool)
    )
    assert stats.approx_kl == 0.0 and stats.clip_fraction == 0.0 and stats.ratio_mean == 1.0


def test_stats_are_frozen_and_prefixed():
    logp, old_logp, adv, mask = _hand_case()
    _, stats = ppo_policy_loss(logp, old_logp, adv, mask)
    assert isinstance(stats, PolicyLossStats)
    with pytest.raises(AttributeError):
        stats.loss = 0.0  # type: ignore[misc]
    metrics = stats.to_metrics()
    assert all(name.startswith("loss/") for name in metrics)
    assert all(isinstance(v, float) for v in metrics.values())


@pytest.mark.parametrize("agg", [a.value for a in LossAgg])
def test_matches_loop(agg):
    g = torch.Generator().manual_seed(1)
    logp, old_logp = torch.randn(2, 4, 6, generator=g, dtype=torch.float64) * 0.5
    adv = torch.randn(4, 6, generator=g, dtype=torch.float64)
    mask = torch.rand(4, 6, generator=g) > 0.4
    row_sums, row_means, all_tokens = [], [], []
    for b in range(4):
        losses = []
        for t in range(6):
            if not mask[b, t]:
                continue
            a, rho = float(adv[b, t]), math.exp(float(logp[b, t] - old_logp[b, t]))
            loss = max(-a * rho, -a * min(max(rho, 0.8), 1.28))
            losses.append(min(loss, -a * 3.0) if a < 0 else loss)
        all_tokens += losses
        if losses:
            row_sums.append(sum(losses))
            row_means.append(sum(losses) / len(losses))
    expected = {
        "token-mean": sum(all_tokens) / len(all_tokens),
        "seq-mean-token-sum": sum(row_sums) / len(row_sums),
        "seq-mean-token-mean": sum(row_means) / len(row_means),
    }[agg]
    loss, _ = ppo_policy_loss(logp, old_logp, adv, mask, agg=agg)
    assert loss.item() == pytest.approx(expected, rel=1e-9)
