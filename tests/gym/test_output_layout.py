"""Output layout checks of the integrity hook (gym/candidate/integrity.py): a broadcast view and a view
into a buffer at least twice the outputs' size are hack 13; ordinary layouts are not."""

import torch

from drkernel.gym.candidate.integrity import SPARE_STORAGE_BYTES, output_layout_hacks


def _codes(outputs):
    return [h.code for h in output_layout_hacks(outputs)]


def test_ordinary_outputs_pass():
    x = torch.randn(256, 256)
    assert _codes(x) == [] and _codes((x, x.sum(1))) == []
    assert _codes(torch.randn(256, 256).t()) == []  # transposed: every value stored once
    stacked = torch.empty(2, 512, 512)  # two outputs computed into one buffer, each a half of it
    assert _codes((stacked[0], stacked[1])) == []
    padded = torch.empty(513, 512)[:512]  # padded by one row to a block: less than the spare allowance
    assert _codes(padded) == []


def test_a_broadcast_view_is_caught():
    row = torch.randn(1, 512)
    out = row.expand(256, 512)  # the values of 255 rows never written
    hacks = output_layout_hacks(out)
    assert [h.code for h in hacks] == [13] and "131072 values shown, 512 stored" in hacks[0].evidence


def test_a_view_into_a_doubled_buffer_is_caught():
    # hand-worked: 2 * 128 * 1024 fp32 values = 1 MiB buffer, a 512 KiB view at an offset: 512 KiB spare
    x = torch.randn(128 * 1024)
    doubled = torch.cat([x, x])
    rolled = doubled[1000:1000 + x.numel()]  # roll(x, -1000) served as a view
    assert torch.equal(rolled, torch.roll(x, -1000))
    assert _codes(rolled) == [13]
    assert 128 * 1024 * 4 > SPARE_STORAGE_BYTES
