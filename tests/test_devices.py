"""The one device type: parsing, the torch-free guess, resolution and the per-rank device."""

import pytest
import torch

from drkernel.devices import Device, DeviceKind, resolve
from drkernel.errors import ConfigError


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "cpu:0", "", "CUDA"])
def test_other_spellings_are_refused_naming_where(name):
    with pytest.raises(ConfigError, match="model.device"):
        Device.parse(name, "model.device")


def test_parse_and_print_round_trip():
    for name in ("auto", "cpu", "cuda", "cuda:3"):
        assert str(Device.parse(name)) == name
    assert Device.parse(" cuda:2 ") == Device(DeviceKind.CUDA, 2)


def test_guess_needs_no_torch_and_honours_hidden_gpus(monkeypatch):
    assert Device.parse("cuda").guess() == "cuda:0" and Device.parse("cuda:3").guess() == "cuda:3"
    assert Device.parse("cpu").guess() == "cpu"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert Device.parse("auto").guess() == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a machine without CUDA resolves")
def test_resolution_without_cuda():
    assert resolve("auto") == torch.device("cpu") == resolve("cpu")
    with pytest.raises(ConfigError, match="eval.device cuda:1: CUDA is not available"):
        resolve("cuda:1", "eval.device")


def test_each_rank_gets_its_own_gpu_and_one_named_gpu_for_all_is_refused():
    assert Device.parse("cpu").for_rank(1, 4) == Device.parse("cpu")
    assert Device.parse("cuda").for_rank(2, 4) == Device(DeviceKind.CUDA, 2)
    assert Device.parse("cuda:0").for_rank(0, 1) == Device(DeviceKind.CUDA, 0)
    with pytest.raises(ConfigError, match="every one of the 4 ranks"):
        Device.parse("cuda:0").for_rank(1, 4, "model.device")
    expected = Device(DeviceKind.CUDA, 3) if torch.cuda.is_available() else Device(DeviceKind.AUTO)
    assert Device.parse("auto").for_rank(3, 4) == expected


def test_a_worker_list_names_cpu_workers_by_count_and_gpus_by_index():
    from drkernel.service.workers import local_devices

    assert local_devices("cpu:2") == ["cpu", "cpu"] and local_devices(" cuda:0, cuda:3 ") == ["cuda:0", "cuda:3"]
    for bad in ("cuda", "cuda:x", "cpu:0", "gpu:1", ","):
        with pytest.raises(ConfigError, match="expected (auto, )?cpu:N"):
            local_devices(bad)
