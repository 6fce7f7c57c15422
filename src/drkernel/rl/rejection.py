"""Sample filters: profiling-based rejection sampling (PRS, Sec. 4) and dynamic sampling (Sec. 6).

PRS lowers the chance that a "lazy" turn (correct, but with little of its device time in its own
Triton kernels) is trained on. Dynamic sampling drops prompts whose rows carry no signal.
"""

import enum

import torch

from drkernel.rl._segments import segment_index, segment_sum


class CoverageMode(str, enum.Enum):
    """Which coverage c the PRS keep probability reads."""

    TURN = "turn"
    """The turn's own time coverage."""
    TRAJECTORY_GEOMETRIC = "trajectory-geometric"
    """Geometric mean of coverage over the trajectory's profiled, correct, non-hacked turns."""


def _geometric_mean_per_trajectory(
    coverage: torch.Tensor, measured: torch.Tensor, traj_id: torch.Tensor
) -> torch.Tensor:
    """exp(mean log c) over each trajectory's measured rows -> [R]; NaN if it has none."""
    traj, num_traj = segment_index(traj_id)
    log_c = torch.log(coverage.clamp(min=1e-12))
    log_c = torch.where(measured, log_c, torch.zeros_like(log_c))
    count = segment_sum(measured.to(coverage.dtype), traj, num_traj)[traj]  # (R,)
    mean_log = segment_sum(log_c, traj, num_traj)[traj] / count.clamp(min=1)
    return torch.where(count > 0, torch.exp(mean_log), torch.full_like(mean_log, float("nan")))


def prs_keep_probability(
    coverage: torch.Tensor,
    correct: torch.Tensor,
    hacked: torch.Tensor,
    traj_id: torch.Tensor,
    mode: CoverageMode | str = CoverageMode.TURN,
    speedup: torch.Tensor | None = None,
    always_keep_speedup: float | None = None,
    threshold: float = 0.3,
    ramp: float = 0.1,
) -> torch.Tensor:
    """Probability that PRS keeps each turn in the loss.

    p = clip((c - threshold) / ramp, 0, 1) for correct, non-hacked turns; p = 1 for every other
    turn, for a turn whose coverage was not measured (NaN) and, when ``always_keep_speedup`` is
    set, for a turn with speedup >= it (Sec. 4, "PRS").

    Args:
        coverage: [R] float, time coverage c in [0, 1]; NaN = not profiled.
        correct: [R] bool.
        hacked: [R] bool.
        traj_id: [R] long, trajectory of each row (read in trajectory-geometric mode).
        mode: a :class:`CoverageMode` or its string value.
        speedup: [R] float or None; needed only with ``always_keep_speedup``.
        always_keep_speedup: speedup threshold above which a turn is always kept; None = off.
        threshold, ramp: the paper's 0.3 and 0.1.

    Returns:
        [R] float keep probabilities in [0, 1].
    """
    mode = CoverageMode(mode)
    eligible = correct & ~hacked
    measured = eligible & torch.isfinite(coverage)
    if mode is CoverageMode.TRAJECTORY_GEOMETRIC:
        coverage = _geometric_mean_per_trajectory(coverage, measured, traj_id)
        measured = eligible & torch.isfinite(coverage)
    p = ((coverage - threshold) / ramp).clamp(0.0, 1.0)
    keep_all = ~measured
    if always_keep_speedup is not None:
        if speedup is None:
            raise ValueError("prs_keep_probability: always_keep_speedup is set but speedup is None")
        keep_all = keep_all | (speedup >= always_keep_speedup)
    return torch.where(keep_all, torch.ones_like(p), p)


def prs_keep_mask(keep_probability: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Bernoulli draw of the PRS keep mask: [R] float probabilities -> [R] bool, True = keep.

    Pass a seeded ``torch.Generator`` (on the tensor's device) for reproducible draws.
    """
    return torch.bernoulli(keep_probability, generator=generator).bool()


def zero_variance_groups(values: torch.Tensor, group_id: torch.Tensor, eps: float = 1e-3) -> torch.Tensor:
    """Rows whose group has (near) zero variance: dynamic sampling drops them (Sec. 6).

    flag_i = std_{j in group(i)} v_j < eps, with the population std (a group of one is flagged:
    it has nothing to compare with).

    Args:
        values: [R] float, e.g. rewards.
        group_id: [R] long, prompt of each row.
        eps: std threshold, the paper's 1e-3.

    Returns:
        [R] bool, True = the row's group has std < eps (drop it).
    """
    segment, num_segments = segment_index(group_id)
    v = values.double()
    count = segment_sum(torch.ones_like(v), segment, num_segments)  # (S,)
    mean = segment_sum(v, segment, num_segments) / count  # (S,)
    var = segment_sum((v - mean[segment]).square(), segment, num_segments) / count  # (S,)
    return (var.sqrt() < eps)[segment]
