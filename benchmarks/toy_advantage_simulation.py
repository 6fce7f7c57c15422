"""Toy multi-turn simulation: bias and variance of four advantage estimators.

A re-creation of the paper's toy study (Sec. 6): groups of N = 16 trajectories of up to T = 3
turns, each trajectory ending after a turn with probability 0.1, so that the group size N_t
shrinks and varies with the turn. The environment is a small tabular MDP in which the greedy
action spoils later turns, so that crediting an action with its later rewards matters:

    state s in {0 broken, 1 working}, starting broken; action a in {0 fix, 1 patch, 2 hack}
    reward r = mu[s, a] + N(0, 0.5^2);   next state working with probability P[s, a]
    policy pi_t(a | s) = softmax(theta[t, s]), theta fixed and random (seeded)

Because the MDP is tiny, the exact objective J = E[sum_t r_t] and its gradient are computed by
dynamic programming plus autograd, and so is V_t(s), which gives the unbiased reference
advantage A* = G_{i,t} - V_t(s_{i,t}). For each estimator we measure

- slope: regression coefficient of its advantage on A* per turn (1 = credits the sample's own
  return fully; self-inclusive GRPO gives about (N_t - 1) / N_t);
- gradient bias: || E[g] - grad J || / || grad J || with its standard error, where
  g = 1/N sum_{i,t} A_{i,t} grad log pi(a_{i,t} | s_{i,t}) is one group's policy-gradient estimate;
- gradient variance: trace of Cov(g) over groups.

Run: ``python benchmarks/toy_advantage_simulation.py --groups 20000 --plot out/toy_advantage.png``.
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from drkernel.rl.advantages import (
    grpo_advantages,
    rloo_trajectory_advantages,
    trloo_advantages,
    turn_independent_advantages,
)
from drkernel.rl.returns import reward_to_go

NUM_TURNS = 3
NUM_SAMPLES = 16
TERMINATION = 0.1
NOISE = 0.5
# Rows: state broken / working; columns: action fix / patch / hack.
MEAN_REWARD = torch.tensor([[0.0, 0.2, 0.5], [1.0, 1.5, 0.6]], dtype=torch.float64)
P_WORKING = torch.tensor([[0.8, 0.4, 0.1], [0.9, 0.6, 0.3]], dtype=torch.float64)
NUM_STATES, NUM_ACTIONS = MEAN_REWARD.shape
ESTIMATORS = ("GRPO (self-inclusive)", "trajectory RLOO", "TRLOO", "turn-independent")


@dataclass(frozen=True)
class EstimatorResult:
    """Measurements of one advantage estimator."""

    slope_per_turn: tuple[float, ...]
    """Regression slope of A on the reference advantage A*, per turn."""
    grad_rel_bias: float
    """|| mean g - grad J || / || grad J ||."""
    grad_rel_bias_se: float
    """Standard error of the mean gradient, in the same units (noise floor of the bias)."""
    grad_variance: float
    """Trace of the covariance of one group's gradient estimate."""


@dataclass(frozen=True)
class SimulationResult:
    num_groups: int
    mean_group_size: tuple[float, ...]
    """Mean N_t per turn."""
    grpo_expected_slope: tuple[float, ...]
    """Row-weighted mean of (N_t - 1) / N_t per turn: the slope GRPO should show."""
    estimators: dict[str, EstimatorResult]


def _policy(theta: torch.Tensor) -> torch.Tensor:
    return torch.softmax(theta, dim=-1)  # (T, S, K)


def exact_values(theta: torch.Tensor) -> torch.Tensor:
    """V_t(s) = sum_a pi_t(a|s) (mu[s,a] + (1 - p_end) sum_s' P(s'|s,a) V_{t+1}(s')) -> [T, S]."""
    pi = _policy(theta)
    values = []
    next_value = torch.zeros(NUM_STATES, dtype=theta.dtype)
    for t in reversed(range(NUM_TURNS)):
        future = P_WORKING * next_value[1] + (1 - P_WORKING) * next_value[0]  # (S, K)
        q = MEAN_REWARD + (1 - TERMINATION) * future if t < NUM_TURNS - 1 else MEAN_REWARD
        next_value = (pi[t] * q).sum(dim=-1)  # (S,)
        values.append(next_value)
    return torch.stack(values[::-1])  # (T, S)


def exact_gradient(theta: torch.Tensor) -> torch.Tensor:
    """grad_theta J with J = V_0(broken), by autograd through :func:`exact_values` -> [T, S, K]."""
    theta = theta.detach().clone().requires_grad_()
    exact_values(theta)[0, 0].backward()
    return theta.grad


def _rollout(theta: torch.Tensor, num_groups: int, g: torch.Generator) -> dict[str, torch.Tensor]:
    """Sample num_groups x NUM_SAMPLES trajectories; return their turn-level rows."""
    pi = _policy(theta)
    shape = (num_groups, NUM_SAMPLES)
    state = torch.zeros(shape, dtype=torch.long)
    alive = torch.ones(shape, dtype=torch.bool)
    columns: dict[str, list[torch.Tensor]] = {k: [] for k in ("alive", "state", "action", "reward")}
    for t in range(NUM_TURNS):
        probs = pi[t][state]  # (M, N, K)
        u = torch.rand(shape, generator=g, dtype=theta.dtype).unsqueeze(-1)
        action = (u > probs.cumsum(dim=-1)).sum(dim=-1).clamp(max=NUM_ACTIONS - 1)  # inverse CDF
        reward = MEAN_REWARD[state, action] + NOISE * torch.randn(shape, generator=g, dtype=theta.dtype)
        for key, value in (("alive", alive), ("state", state), ("action", action), ("reward", reward)):
            columns[key].append(value)
        state = (torch.rand(shape, generator=g, dtype=theta.dtype) < P_WORKING[state, action]).long()
        alive = alive & (torch.rand(shape, generator=g) >= TERMINATION)
    stacked = {k: torch.stack(v, dim=-1) for k, v in columns.items()}  # each (M, N, T)
    keep = stacked.pop("alive")
    group = torch.arange(num_groups)[:, None, None].expand(keep.shape)
    traj = torch.arange(num_groups * NUM_SAMPLES).view(shape)[..., None].expand(keep.shape)
    turn = torch.arange(NUM_TURNS).expand(keep.shape)
    rows = {k: v[keep] for k, v in stacked.items()}
    rows.update(group=group[keep], traj=traj[keep], turn=turn[keep])
    return rows


def _advantages(rows: dict[str, torch.Tensor], returns: torch.Tensor) -> dict[str, torch.Tensor]:
    group, traj, turn, reward = rows["group"], rows["traj"], rows["turn"], rows["reward"]
    return {
        "GRPO (self-inclusive)": grpo_advantages(returns, group, turn),
        "trajectory RLOO": rloo_trajectory_advantages(reward, group, traj),
        "TRLOO": trloo_advantages(returns, group, turn),
        "turn-independent": turn_independent_advantages(reward, group, turn),
    }


def _group_gradients(
    theta: torch.Tensor, rows: dict[str, torch.Tensor], advantage: torch.Tensor, num_groups: int
) -> torch.Tensor:
    """g_m = 1/N sum_{rows of group m} A grad log pi(a|s), with grad log softmax = onehot(a) - pi."""
    t, s, a = rows["turn"], rows["state"], rows["action"]
    score = torch.nn.functional.one_hot(a, NUM_ACTIONS).to(theta.dtype) - _policy(theta)[t, s]  # (R, K)
    slot = (rows["group"] * NUM_TURNS + t) * NUM_STATES + s  # (R,) flat (m, t, s) index
    grads = torch.zeros(num_groups * NUM_TURNS * NUM_STATES, NUM_ACTIONS, dtype=theta.dtype)
    grads.index_add_(0, slot, advantage[:, None] * score)
    return grads.view(num_groups, -1) / NUM_SAMPLES  # (M, T*S*K)


def _slope(x: torch.Tensor, y: torch.Tensor) -> float:
    """Least-squares slope of y on x (with intercept)."""
    xc = x - x.mean()
    return float((xc * (y - y.mean())).sum() / xc.square().sum())


def simulate(num_groups: int = 20000, seed: int = 0) -> SimulationResult:
    """Run the simulation; deterministic for a given (num_groups, seed)."""
    g = torch.Generator().manual_seed(seed)
    theta = 0.5 * torch.randn(NUM_TURNS, NUM_STATES, NUM_ACTIONS, generator=g, dtype=torch.float64)
    rows = _rollout(theta, num_groups, g)
    returns = reward_to_go(rows["reward"], rows["traj"], rows["turn"])
    reference = returns - exact_values(theta).detach()[rows["turn"], rows["state"]]  # A*
    true_grad = exact_gradient(theta).flatten()

    # Size of each row's (group, turn), for GRPO's expected shrinkage.
    group_turn = rows["group"] * NUM_TURNS + rows["turn"]
    n_t = torch.bincount(group_turn, minlength=num_groups * NUM_TURNS)[group_turn].double()
    by_turn = [rows["turn"] == t for t in range(NUM_TURNS)]

    results = {}
    for name, advantage in _advantages(rows, returns).items():
        grads = _group_gradients(theta, rows, advantage, num_groups)  # (M, D)
        bias = grads.mean(dim=0) - true_grad
        variance = float(grads.var(dim=0).sum())
        results[name] = EstimatorResult(
            slope_per_turn=tuple(_slope(reference[m], advantage[m]) for m in by_turn),
            grad_rel_bias=float(bias.norm() / true_grad.norm()),
            grad_rel_bias_se=(variance / num_groups) ** 0.5 / float(true_grad.norm()),
            grad_variance=variance,
        )
    return SimulationResult(
        num_groups=num_groups,
        mean_group_size=tuple(
            float(torch.bincount(rows["group"][m], minlength=num_groups).double().mean()) for m in by_turn
        ),
        grpo_expected_slope=tuple(float(((n_t[m] - 1) / n_t[m]).mean()) for m in by_turn),
        estimators=results,
    )


def print_table(result: SimulationResult) -> None:
    from rich.console import Console
    from rich.table import Table

    trloo_var = result.estimators["TRLOO"].grad_variance
    sizes = ", ".join(f"{n:.2f}" for n in result.mean_group_size)
    expected = ", ".join(f"{s:.3f}" for s in result.grpo_expected_slope)
    table = Table(
        title=f"Toy advantage simulation: {result.num_groups} groups x {NUM_SAMPLES} samples, "
        f"mean N_t = ({sizes}); GRPO's expected slope ({expected})"
    )
    table.add_column("estimator", no_wrap=True)
    for t in range(NUM_TURNS):
        table.add_column(f"slope t={t + 1}", justify="right")
    table.add_column("grad bias (rel.)", justify="right")
    table.add_column("noise floor (SE)", justify="right")
    table.add_column("grad variance", justify="right")
    table.add_column("variance / TRLOO", justify="right")
    for name, r in result.estimators.items():
        table.add_row(
            name,
            *(f"{s:.3f}" for s in r.slope_per_turn),
            f"{r.grad_rel_bias:.4f}",
            f"{r.grad_rel_bias_se:.4f}",
            f"{r.grad_variance:.4f}",
            f"{r.grad_variance / trloo_var:.2f}",
        )
    console = Console()
    if not console.is_terminal:  # piped output: do not squeeze the table into 80 columns
        console.width = 130
    console.print(table)


def plot(result: SimulationResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(result.estimators)
    colors = [f"C{k}" for k in range(len(names))]
    fig, (ax_slope, ax_bias, ax_var) = plt.subplots(1, 3, figsize=(15, 4.2))
    width = 0.8 / len(names)
    for k, name in enumerate(names):
        turns = [t + (k - (len(names) - 1) / 2) * width for t in range(1, NUM_TURNS + 1)]
        ax_slope.bar(turns, result.estimators[name].slope_per_turn, width, label=name, color=colors[k])
    ax_slope.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax_slope.set(
        title="Advantage slope on unbiased reference A*",
        xlabel="turn",
        ylabel="slope (1 = unbiased)",
        xticks=range(1, NUM_TURNS + 1),
        ylim=(0, 1.4),
    )
    ax_slope.legend(fontsize=8, loc="upper center", ncol=2)

    ax_bias.bar(names, [result.estimators[n].grad_rel_bias for n in names], color=colors)
    # An unbiased estimator's measured bias is sampling noise of about this size.
    ax_bias.scatter(
        names,
        [result.estimators[n].grad_rel_bias_se for n in names],
        marker="_",
        s=900,
        color="black",
        zorder=3,
        label="noise floor (SE)",
    )
    ax_bias.set(
        title="Policy-gradient bias ||E[g] - grad J|| / ||grad J||",
        ylabel="relative bias (log scale)",
        yscale="log",
    )
    ax_bias.legend(fontsize=8, loc="center left")
    trloo_var = result.estimators["TRLOO"].grad_variance
    ax_var.bar(names, [result.estimators[n].grad_variance / trloo_var for n in names], color=colors)
    ax_var.set(title="Policy-gradient variance, relative to TRLOO", ylabel="tr Cov(g) / TRLOO")
    for ax in (ax_bias, ax_var):
        ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20000, help="number of prompts (groups of 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", type=Path, default=Path("out/toy_advantage_simulation.png"))
    args = parser.parse_args()
    result = simulate(args.groups, args.seed)
    print_table(result)
    plot(result, args.plot)
    print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
