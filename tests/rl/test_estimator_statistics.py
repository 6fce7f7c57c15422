"""Statistical properties of the advantage estimators, on simulated groups (fixed seeds).

1. Regressing an estimator's advantage on the sample's own return G_i within groups of size N_t:
   TRLOO's baseline is independent of G_i, so the slope is 1; self-inclusive GRPO puts G_i / N_t
   into its own baseline, so the slope is (N_t - 1) / N_t.
2. A two-turn bandit whose exact policy gradient is known in closed form: TRLOO's (and trajectory
   RLOO's) gradient estimates are unbiased, GRPO's are shrunk by E[(N_t - 1) / N_t], and the
   turn-independent estimator loses the credit that turn 1 earns at turn 2.
"""

import math

import pytest
import torch

from drkernel.rl.advantages import (
    grpo_advantages,
    rloo_trajectory_advantages,
    trloo_advantages,
    turn_independent_advantages,
)
from drkernel.rl.returns import reward_to_go


def _rows(alive: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """group_id, traj_id, turn of the True entries of an alive mask [prompts, samples, turns]."""
    prompts, samples, turns = alive.shape
    group = torch.arange(prompts)[:, None, None].expand(alive.shape)
    traj = torch.arange(prompts * samples).view(prompts, samples, 1).expand(alive.shape)
    turn = torch.arange(turns).expand(alive.shape)
    return group[alive], traj[alive], turn[alive]


def _slope(x: torch.Tensor, y: torch.Tensor) -> float:
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / xc.square().sum())


def test_regression_slope_on_own_return():
    g = torch.Generator().manual_seed(0)
    prompts, samples, turns = 6000, 16, 3
    # Each trajectory continues to the next turn with probability 0.6: N_2 ~ 1 + Bin(15, 0.6)
    # for a sample that got there, N_3 smaller still; every N_t from 1 to 16 shows up.
    cont = torch.rand(prompts, samples, turns, generator=g) < 0.6
    cont[..., 0] = True
    alive = cont.cumprod(dim=-1).bool()
    group, traj, turn = _rows(alive)
    # Skewed per-turn rewards: 0 with probability 0.6, else uniform on [1, 2].
    reward = (torch.rand(group.shape, generator=g, dtype=torch.float64) < 0.4) * (
        1 + torch.rand(group.shape, generator=g, dtype=torch.float64)
    )
    returns = reward_to_go(reward, traj, turn)
    trloo = trloo_advantages(returns, group, turn)
    grpo = grpo_advantages(returns, group, turn)

    group_turn = group * turns + turn
    n_t = torch.bincount(group_turn)[group_turn]
    checked = 0
    for t in range(turns):
        for n in range(1, samples + 1):
            cell = (turn == t) & (n_t == n)
            if cell.sum() < 3000:
                continue
            checked += 1
            assert _slope(returns[cell], trloo[cell]) == pytest.approx(1.0, abs=0.03), (t, n)
            assert _slope(returns[cell], grpo[cell]) == pytest.approx((n - 1) / n, abs=0.03), (t, n)
    assert checked >= 10  # turn 1 at N = 16 and many (turn, N) cells after it


# Two-turn bandit. Turn 1: a1 ~ Bernoulli(p1), p1 = sigmoid(theta1), r1 = a1 + noise.
# The episode reaches turn 2 with probability q. Turn 2: a2 ~ Bernoulli(p2), p2 = sigmoid(theta2),
# r2 = a2 (1 + a1) + noise: the turn-1 action pays again at turn 2. Noise ~ N(0, 0.5^2).
#   J = p1 + q p2 (1 + p1)
#   dJ/dtheta1 = p1 (1 - p1) (1 + q p2)        (d p / d theta = p (1 - p))
#   dJ/dtheta2 = q p2 (1 - p2) (1 + p1)
# The score of a Bernoulli-logit action is a - p, so one group's estimate is
#   g_t = 1/N sum_i A_{i,t} (a_{i,t} - p_t)   (over the samples that reached turn t).
THETA1, THETA2, Q, N, GROUPS = 0.4, -0.3, 0.7, 4, 40000


def _sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


@pytest.fixture(scope="module")
def bandit_gradients():
    g = torch.Generator().manual_seed(1)
    p1, p2 = _sigmoid(THETA1), _sigmoid(THETA2)
    shape = (GROUPS, N)
    a1 = (torch.rand(shape, generator=g, dtype=torch.float64) < p1).double()
    a2 = (torch.rand(shape, generator=g, dtype=torch.float64) < p2).double()
    r1 = a1 + 0.5 * torch.randn(shape, generator=g, dtype=torch.float64)
    r2 = a2 * (1 + a1) + 0.5 * torch.randn(shape, generator=g, dtype=torch.float64)
    reaches_2 = torch.rand(shape, generator=g) < Q
    alive = torch.stack([torch.ones(shape, dtype=torch.bool), reaches_2], dim=-1)  # (M, N, 2)
    group, traj, turn = _rows(alive)
    reward = torch.stack([r1, r2], dim=-1)[alive]
    score = torch.stack([a1 - p1, a2 - p2], dim=-1)[alive]
    returns = reward_to_go(reward, traj, turn)
    advantages = {
        "trloo": trloo_advantages(returns, group, turn),
        "rloo": rloo_trajectory_advantages(reward, group, traj),
        "grpo": grpo_advantages(returns, group, turn),
        "independent": turn_independent_advantages(reward, group, turn),
    }
    out = {}
    for name, a in advantages.items():
        grads = torch.zeros(GROUPS * 2, dtype=torch.float64).index_add_(0, group * 2 + turn, a * score)
        grads = grads.view(GROUPS, 2) / N  # (M, 2): (dtheta1, dtheta2) per group
        out[name] = (grads.mean(dim=0), grads.std(dim=0) / math.sqrt(GROUPS))
    return out


def _exact() -> torch.Tensor:
    p1, p2 = _sigmoid(THETA1), _sigmoid(THETA2)
    return torch.tensor([p1 * (1 - p1) * (1 + Q * p2), Q * p2 * (1 - p2) * (1 + p1)], dtype=torch.float64)


def _assert_within(mean: torch.Tensor, se: torch.Tensor, target: torch.Tensor, z: float = 4.0):
    assert ((mean - target).abs() < z * se).all(), (mean, target, se)


@pytest.mark.parametrize("name", ["trloo", "rloo"])
def test_bandit_gradient_is_unbiased(bandit_gradients, name):
    mean, se = bandit_gradients[name]
    _assert_within(mean, se, _exact())


def test_bandit_grpo_gradient_is_shrunk(bandit_gradients):
    # Turn 1: N_1 = 4 always -> factor 3/4. Turn 2: the other 3 samples reach it with probability
    # q each, so N_2 = 1 + k, k ~ Bin(3, q), and the factor is E[k / (k + 1)].
    turn2 = sum(math.comb(3, k) * Q**k * (1 - Q) ** (3 - k) * k / (k + 1) for k in range(4))
    mean, se = bandit_gradients["grpo"]
    _assert_within(mean, se, _exact() * torch.tensor([0.75, turn2], dtype=torch.float64))
    assert ((mean - _exact()).abs() > 4 * se).all()


def test_bandit_turn_independent_loses_later_credit(bandit_gradients):
    # Turn 1 is credited with r1 only: E = p1 (1 - p1), missing the q p2 p1 (1 - p1) that a1 earns
    # at turn 2. Turn 2 is the last turn, so there it is unbiased.
    p1 = _sigmoid(THETA1)
    mean, se = bandit_gradients["independent"]
    _assert_within(mean, se, torch.tensor([p1 * (1 - p1), _exact()[1].item()], dtype=torch.float64))
    assert (mean[0] - _exact()[0]).abs() > 4 * se[0]
