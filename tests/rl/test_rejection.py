import math

import pytest
import torch

from drkernel.rl.rejection import prs_keep_mask, prs_keep_probability, zero_variance_groups

NAN = float("nan")


def test_keep_probability_per_turn_hand_worked():
    # p = clip((c - 0.3) / 0.1, 0, 1) for correct, non-hacked turns:
    #   c = 0.25 -> 0;  c = 0.35 -> 0.5;  c = 0.45 -> 1.
    # Incorrect (c = 0.1) -> 1;  hacked (c = 0.1) -> 1;  correct but not profiled (NaN) -> 1.
    coverage = torch.tensor([0.25, 0.35, 0.45, 0.1, 0.1, NAN])
    correct = torch.tensor([True, True, True, False, True, True])
    hacked = torch.tensor([False, False, False, False, True, False])
    traj = torch.arange(6)
    p = prs_keep_probability(coverage, correct, hacked, traj)
    torch.testing.assert_close(p, torch.tensor([0.0, 0.5, 1.0, 1.0, 1.0, 1.0]))


def test_keep_probability_always_keep_fast_turns():
    # Same c = 0.25 (p = 0) twice; the turn with speedup 2.5 >= 2 is kept anyway.
    coverage = torch.tensor([0.25, 0.25])
    flags = torch.tensor([True, True]), torch.tensor([False, False])
    speedup = torch.tensor([2.5, 1.1])
    p = prs_keep_probability(coverage, *flags, torch.arange(2), speedup=speedup, always_keep_speedup=2.0)
    torch.testing.assert_close(p, torch.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="speedup"):
        prs_keep_probability(coverage, *flags, torch.arange(2), always_keep_speedup=2.0)


def test_keep_probability_trajectory_geometric_hand_worked():
    # Trajectory 0: correct turns with c = 0.25 and 0.49 -> sqrt(0.1225) = 0.35 -> p = 0.5 for
    # both; its incorrect turn (c = 0.0) is not in the mean and keeps p = 1.
    # Trajectory 1: c = 0.2 and 0.8 -> sqrt(0.16) = 0.4 -> p = 1 (per turn it would be 0 and 1).
    coverage = torch.tensor([0.25, 0.0, 0.49, 0.2, 0.8])
    correct = torch.tensor([True, False, True, True, True])
    hacked = torch.zeros(5, dtype=torch.bool)
    traj = torch.tensor([0, 0, 0, 1, 1])
    p = prs_keep_probability(coverage, correct, hacked, traj, mode="trajectory-geometric")
    torch.testing.assert_close(p, torch.tensor([0.5, 1.0, 0.5, 1.0, 1.0]))


def test_trajectory_geometric_matches_loop():
    g = torch.Generator().manual_seed(0)
    coverage = torch.rand(80, generator=g, dtype=torch.float64) * 0.3 + 0.25
    coverage[::7] = NAN
    correct = torch.rand(80, generator=g) > 0.3
    hacked = torch.rand(80, generator=g) > 0.8
    traj = torch.randint(0, 20, (80,), generator=g)
    expected = []
    for i in range(80):
        logs = [
            math.log(coverage[k])
            for k in range(80)
            if traj[k] == traj[i] and correct[k] and not hacked[k] and not math.isnan(coverage[k])
        ]
        if not (correct[i] and not hacked[i]) or not logs:
            expected.append(1.0)
        else:
            c = math.exp(sum(logs) / len(logs))
            expected.append(min(max((c - 0.3) / 0.1, 0.0), 1.0))
    p = prs_keep_probability(coverage, correct, hacked, traj, mode="trajectory-geometric")
    torch.testing.assert_close(p, torch.tensor(expected, dtype=torch.float64))


def test_keep_mask_draws_are_reproducible_and_calibrated():
    p = torch.tensor([0.0, 1.0, 0.3]).repeat(5000)
    first = prs_keep_mask(p, torch.Generator().manual_seed(7))
    second = prs_keep_mask(p, torch.Generator().manual_seed(7))
    assert torch.equal(first, second)
    assert not first[0::3].any() and first[1::3].all()
    # 5000 draws at p = 0.3: standard error sqrt(0.21 / 5000) = 0.0065.
    assert first[2::3].float().mean().item() == pytest.approx(0.3, abs=0.03)


def test_zero_variance_groups_hand_worked():
    # Prompt 0: rewards (1, 1, 1) -> std 0: flagged. Prompt 1: (0, 0.5) -> std 0.25: kept.
    # Prompt 2: (2, 2.0005) -> population std 0.00025 < 1e-3: flagged. Prompt 3: one row: flagged.
    values = torch.tensor([1.0, 1.0, 1.0, 0.0, 0.5, 2.0, 2.0005, 3.0])
    group = torch.tensor([0, 0, 0, 1, 1, 2, 2, 3])
    expected = [True, True, True, False, False, True, True, True]
    assert zero_variance_groups(values, group).tolist() == expected


def test_zero_variance_groups_matches_loop():
    g = torch.Generator().manual_seed(1)
    group = torch.randint(0, 15, (90,), generator=g)
    values = torch.randint(0, 2, (90,), generator=g).float() * (group % 3 != 0)  # some constant groups
    expected = []
    for i in range(90):
        members = [float(values[j]) for j in range(90) if group[j] == group[i]]
        mean = sum(members) / len(members)
        std = math.sqrt(sum((m - mean) ** 2 for m in members) / len(members))
        expected.append(std < 1e-3)
    assert zero_variance_groups(values, group).tolist() == expected
    assert 0 < sum(expected) < 90
