"""Provenance: nvidia-smi's answer parsed, the differences a replay names, and the declared baseline
is what the gym's children pin."""

import pytest

from drkernel.gym.precision import BASELINE_FLAGS, mismatch
from drkernel.gym.provenance import build, config_hash, differences, parse_clocks, physical_index


def prov(**changes):
    base = dict(device_name="NVIDIA H100 80GB HBM3", versions={"torch": "2.11", "triton": "3.6", "cuda": "12.8"},
                reference_mode="eager", reference_flags=BASELINE_FLAGS, solution_flags=None,
                tolerance_profile="kernelgym", config={"trials": 5}, problem_hash="p", solution_hash="s",
                seeds={"trials": [1]}, clocks_start=None, clocks_end=None)
    return build(**{**base, **changes})


def test_parse_clocks():
    assert parse_clocks("1980, 2619, Not Active, 550.54.15\n") == {
        "sm_mhz": 1980.0, "mem_mhz": 2619.0, "locked": False, "driver": "550.54.15"}
    assert parse_clocks("[N/A], 2619, Active, 550.54.15")["sm_mhz"] is None
    assert parse_clocks("") is None and parse_clocks("1, 2") is None


def test_physical_index_follows_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert physical_index("cuda:1") == 5 and physical_index("cuda") == 3 and physical_index("cpu") is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert physical_index("cuda:2") == 2


def test_build_reads_driver_and_lock_from_the_clocks():
    p = prov(clocks_start={"sm_mhz": 1980.0, "mem_mhz": 2619.0, "locked": True, "driver": "550"},
             clocks_end={"sm_mhz": 1755.0, "mem_mhz": 2619.0, "locked": True, "driver": "550"})
    assert p.driver_version == "550" and p.clocks_locked is True and p.clocks_end == {"sm_mhz": 1755.0, "mem_mhz": 2619.0}
    assert p.cuda_version == "12.8" and p.precision == "fp32" and p.config_hash == config_hash({"trials": 5})
    assert prov().clocks_locked is None and prov().driver_version is None


def test_differences_name_the_changed_field_and_ignore_seeds_and_clocks():
    a = prov()
    assert differences(a, prov(seeds={"trials": [2]}, clocks_start={"sm_mhz": 1.0})) == []
    tf32 = prov(reference_flags={**BASELINE_FLAGS, "cuda.matmul.allow_tf32": True})
    assert differences(a, tf32) == ["reference_flags.cuda.matmul.allow_tf32: False -> True"]
    assert differences(a, prov(device_name="NVIDIA H200")) == ["gpu_model: 'NVIDIA H100 80GB HBM3' -> 'NVIDIA H200'"]
    assert differences(a, None) == ["provenance: missing on one side"]


def test_the_declared_baseline_is_what_the_children_pin():
    torch = pytest.importorskip("torch")
    from drkernel.gym.harness.inputs import pin_backend_flags

    saved = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True  # inherited from the process: the pin overrides it
        assert pin_backend_flags() == BASELINE_FLAGS
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    assert mismatch("solution", None) == []
