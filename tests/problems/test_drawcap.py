"""CPU sizing of a problem whose ``get_inputs`` reads values (problems/scaling.py `measure`,
problems/drawcap.py): meta cannot run ``int(offsets[-1])``, so the inputs are drawn on the host under
an allocation cap, sized before anything past the cap is allocated."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from drkernel.problems.drawcap import DrawCap, TooLarge
from drkernel.problems.scaling import measure, rewrite_constants, scale_down

JAGGED = (Path(__file__).parents[1] / "gym" / "reproducers" / "jagged_item_problem.py").read_text()


def test_a_value_reading_get_inputs_is_measured_on_a_host_draw():
    with pytest.raises(RuntimeError, match="meta"), torch.device("meta"):
        torch.zeros(3).cumsum(0)[-1].item()
    m = measure(JAGGED)
    # values (T, 64) with 8 <= T <= 8 * 32 rows, offsets (9,); no parameters
    assert 8 * 64 + 9 <= m["elements"] <= 8 * 32 * 64 + 9
    assert m["runs"] is None  # repeat_interleave's output size depends on the data: not on meta
    assert measure(JAGGED) == m  # a seeded draw: the same sizes every time


def test_past_the_cap_the_sizes_read_as_infinite():
    m = measure(JAGGED, limit_bytes=1 << 10)
    assert math.isinf(m["elements"]) and math.isinf(m["bytes"])


def test_the_cap_refuses_an_allocation_before_it_happens():
    cap = DrawCap(1 << 20)
    with cap, pytest.raises(TooLarge):
        torch.empty(1 << 40, dtype=torch.uint8)  # a terabyte: sized on meta, never allocated
    with DrawCap(1 << 20) as small:
        x = torch.ones(1024)       # 4 KiB
        x.add_(1)                  # in place: nothing new
        x[:10].sum()               # a view (nothing) and a 4-byte result
    assert small.used == 4096 + 4


def test_scaling_brings_a_large_value_reading_problem_within_budget():
    big = rewrite_constants(JAGGED, {"B": 4096, "M": 1024, "MAX_LEN": 4096})  # ~34 GB of values in full
    chosen = scale_down(big, {}, budget=1 << 16)
    assert measure(rewrite_constants(big, chosen))["elements"] <= 1 << 16
