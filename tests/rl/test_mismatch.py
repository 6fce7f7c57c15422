import math

import pytest
import torch

from drkernel.rl.mismatch import (
    WeightLevel,
    importance_weights,
    log_ratio,
    mismatch_rejection,
    mismatch_stats,
)

# Three rows (turns); rows 0 and 1 are trajectory 5, row 2 is trajectory 8. Per-token
# l = logp_train - logp_rollout, the last token of rows 1 and 2 not counted (its l is ignored):
#   row 0: l = (0.1, -0.3, 0.2)     sum 0.0,  mean 0.0
#   row 1: l = (0.4, 0.2, [9.0])    sum 0.6,  mean 0.3
#   row 2: l = (-0.2, 0.0, [-9.0])  sum -0.2, mean -0.1
# Trajectory 5: sum 0.6 over 5 tokens, mean 0.12; trajectory 8: sum -0.2 over 2, mean -0.1.
L = torch.tensor([[0.1, -0.3, 0.2], [0.4, 0.2, 9.0], [-0.2, 0.0, -9.0]], dtype=torch.float64)
MASK = torch.tensor([[True, True, True], [True, True, False], [True, True, False]])
TRAJ = torch.tensor([5, 5, 8])
ROLLOUT = torch.full((3, 3), -2.0, dtype=torch.float64)
TRAIN = ROLLOUT + L


@pytest.mark.parametrize(
    ("level", "row_log_weight"),
    [
        ("turn", [0.0, 0.6, -0.2]),
        ("turn-geometric", [0.0, 0.3, -0.1]),
        ("sequence", [0.6, 0.6, -0.2]),
        ("geometric", [0.12, 0.12, -0.1]),
    ],
)
def test_row_level_weights_hand_worked(level, row_log_weight):
    w = importance_weights(TRAIN, ROLLOUT, MASK, TRAJ, level=level)
    expected = torch.tensor(row_log_weight, dtype=torch.float64).exp()[:, None].expand(3, 3)
    torch.testing.assert_close(w, expected)


def test_token_weights_and_truncation():
    # exp(0.4) = 1.49 stays; with upper = 1.2 it is cut to 1.2. Uncounted tokens have l = 0 -> 1.
    w = importance_weights(TRAIN, ROLLOUT, MASK, TRAJ, level=WeightLevel.TOKEN)
    assert w[1, 0].item() == pytest.approx(math.exp(0.4))
    assert w[1, 2].item() == 1.0
    cut = importance_weights(TRAIN, ROLLOUT, MASK, TRAJ, level="token", upper=1.2)
    assert cut.max().item() == pytest.approx(1.2)
    # A huge sequence log-ratio is truncated at 2.0 without overflowing to inf.
    big = importance_weights(ROLLOUT + 500.0, ROLLOUT, MASK, TRAJ, level="sequence")
    assert torch.equal(big, torch.full((3, 3), 2.0, dtype=torch.float64))


def test_weights_are_detached():
    train = TRAIN.clone().requires_grad_()
    assert not importance_weights(train, ROLLOUT, MASK, TRAJ).requires_grad


def test_identical_logprobs_keep_everything():
    logp = torch.randn(4, 7, dtype=torch.float64)
    mask = torch.rand(4, 7) > 0.3
    traj = torch.tensor([0, 0, 1, 2])
    for level in WeightLevel:
        assert torch.equal(
            importance_weights(logp, logp.clone(), mask, traj, level), torch.ones(4, 7, dtype=torch.float64)
        )
    keep = mismatch_rejection(logp, logp.clone(), mask, traj)
    assert keep.all()
    stats = mismatch_stats(logp, logp.clone(), mask, keep)
    assert (
        stats.mean_abs_log_ratio == 0.0 and stats.max_abs_log_ratio == 0.0 and stats.rejected_fraction == 0.0
    )


def test_rejection_hand_worked():
    # Five rows, two counted tokens each unless masked; l per token and the verdict:
    #   row 0 (traj 0): l = (0.0004, 0.0006), mean 0.0005 -> ratio 1.0005 in [0.999, 1.001]: keep.
    #   row 1 (traj 1): l = (0.003, 0.001), mean 0.002 -> ratio 1.002 > 1.001: drop.
    #   rows 2, 3 (traj 2): l = (0, 0) and ([-10, not counted], 0): mean 0 -> ratio 1: keep both.
    #   row 4 (traj 3): a token of ratio 1e-5 < 1e-4: vetoed (its geometric mean is out too).
    log_r = torch.tensor(
        [[0.0004, 0.0006], [0.003, 0.001], [0.0, 0.0], [-10.0, 0.0], [0.0, math.log(1e-5)]],
        dtype=torch.float64,
    )
    mask = torch.tensor([[True, True], [True, True], [True, True], [False, True], [True, True]])
    traj = torch.tensor([0, 1, 2, 2, 3])
    rollout = torch.full_like(log_r, -2.0)
    keep = mismatch_rejection(rollout + log_r, rollout, mask, traj)
    assert keep.tolist() == [True, False, True, True, False]
    # 2 of 5 rows rejected; the largest counted |l| is -log(1e-5) = 11.5 (the -10 is masked).
    stats = mismatch_stats(rollout + log_r, rollout, mask, keep)
    assert stats.rejected_fraction == pytest.approx(2 / 5)
    assert stats.max_abs_log_ratio == pytest.approx(-math.log(1e-5))
    assert all(name.startswith("mismatch/") for name in stats.to_metrics())


def test_token_veto_drops_only_its_turn():
    # Trajectory 0: row 0 has 200 tokens with l = 0, row 1 one token of ratio 5e-5 < 1e-4.
    # Its geometric mean exp(log(5e-5) / 201) = 0.952 is outside the default band, so the band is
    # widened to see the veto alone: row 1 is dropped, row 0 is kept.
    rollout = torch.zeros(2, 200, dtype=torch.float64)
    train = rollout.clone()
    train[1, 0] = math.log(5e-5)
    mask = torch.zeros(2, 200, dtype=torch.bool)
    mask[0, :] = True
    mask[1, 0] = True
    keep = mismatch_rejection(train, rollout, mask, torch.tensor([0, 0]), low=0.5, high=2.0)
    assert keep.tolist() == [True, False]


def test_matches_loop():
    g = torch.Generator().manual_seed(0)
    rollout = -torch.rand(12, 6, generator=g, dtype=torch.float64)
    train = rollout + torch.randn(12, 6, generator=g, dtype=torch.float64) * 1e-3
    train[3, 2] = rollout[3, 2] + math.log(1e-6)  # one vetoed token
    mask = torch.rand(12, 6, generator=g) > 0.2
    traj = torch.randint(0, 5, (12,), generator=g)
    log_r = log_ratio(train, rollout, mask)

    def traj_tokens(b):
        return [float(log_r[k, t]) for k in range(12) if traj[k] == traj[b] for t in range(6) if mask[k, t]]

    seq = torch.empty(12, dtype=torch.float64)
    geo = torch.empty(12, dtype=torch.float64)
    keep = []
    for b in range(12):
        tokens = traj_tokens(b)
        seq[b] = min(math.exp(sum(tokens)), 2.0)
        mean = sum(tokens) / max(len(tokens), 1)
        geo[b] = min(math.exp(mean), 2.0)
        veto = any(math.exp(float(log_r[b, t])) < 1e-4 for t in range(6) if mask[b, t])
        keep.append(0.999 <= math.exp(mean) <= 1.001 and not veto)
    torch.testing.assert_close(importance_weights(train, rollout, mask, traj, "sequence")[:, 0], seq)
    torch.testing.assert_close(importance_weights(train, rollout, mask, traj, "geometric")[:, 0], geo)
    assert mismatch_rejection(train, rollout, mask, traj).tolist() == keep
    assert 0 < sum(keep) < 12  # the random case exercises both verdicts
