"""Segment (group) reductions over turn-level rows, shared by the RL modules.

A *segment* is the set of rows that share a key, e.g. ``(group_id, turn)``. Keys become dense
segment indices with :func:`segment_index`; reductions then run with ``index_add_`` /
``scatter_reduce`` instead of Python loops.
"""

import torch


def segment_index(*keys: torch.Tensor) -> tuple[torch.Tensor, int]:
    """Dense segment index of each row for the composite key ``keys``.

    Args:
        *keys: one or more integer tensors of shape [R].

    Returns:
        ``(index, num_segments)``: ``index`` is a LongTensor [R] in ``[0, num_segments)``; rows
        get the same index exactly when all their keys are equal.
    """
    # Fold the keys in one at a time: 1-D unique is much faster than unique(dim=0) on a stack.
    segments, index = torch.unique(keys[0], return_inverse=True)
    for key in keys[1:]:
        key_values, key_index = torch.unique(key, return_inverse=True)
        segments, index = torch.unique(index * key_values.numel() + key_index, return_inverse=True)
    return index, segments.numel()


def segment_sum(values: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Sum of ``values`` [R] per segment -> [num_segments]."""
    out = torch.zeros(num_segments, dtype=values.dtype, device=values.device)
    return out.index_add_(0, index, values)


def segment_amin(values: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Minimum of ``values`` [R] per segment -> [num_segments]; +inf for an empty segment."""
    out = torch.full((num_segments,), float("inf"), dtype=values.dtype, device=values.device)
    return out.scatter_reduce_(0, index, values, reduce="amin", include_self=True)
