"""Speed-of-light arithmetic on hand-worked profiles, and the device table's lookup."""

import pytest

from drkernel.gym.roofline import Work, peak_for, roofline_ms, sol_fraction, work_of

FP32_MM = {"aten::mm.default": [1, 6.7e9 / 67e12, 6.7e9, 1e6]}    # priced at the fp32 rate: 0.1 ms
HALF_MM = {"aten::mm.default": [1, 9.89e9 / 989e12, 9.89e9, 1e6]}  # at the tensor-core rate: 0.01 ms
RELU = {"aten::relu.default": [1, 4e8 / 3.35e12, 1e8, 4e8], "aten::view.default": [2, 0.0, 0.0, 0.0]}


def test_device_names_find_their_peaks():
    assert peak_for("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert peak_for("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert peak_for("NVIDIA H200").name == "H200"
    assert peak_for("NVIDIA A100-SXM4-80GB").name == "A100 80GB"
    assert peak_for("cpu (triton interpreter)") is None


def test_work_splits_tensor_core_flops_from_the_rest():
    assert work_of(FP32_MM, 0, 0) == Work(0.0, 6.7e9, 0.0, matmul32_flops=6.7e9)  # compute-bound fp32
    assert work_of(HALF_MM, 0, 0) == Work(9.89e9, 0.0, 0.0)
    # a memory-bound op's flops go to the fp32 unit; views cost nothing; bytes are inputs + outputs
    assert work_of(RELU, 100, 28) == Work(0.0, 1e8, 128.0)


def test_roofline_by_hand():
    h100, a100 = peak_for("H100 SXM"), peak_for("A100-SXM4-80GB")
    # compute-bound: 6.7e9 / 67e12 s = 0.1 ms; on an A100 6.7e9 / 19.5e12 s
    assert roofline_ms(work_of(FP32_MM, 0, 0), h100) == pytest.approx(0.1)
    assert roofline_ms(work_of(FP32_MM, 0, 0), a100) == pytest.approx(6.7e9 / 19.5e12 * 1e3)
    # both units: 0.1 ms + 0.01 ms, still above 1 MB / 3.35 TB/s
    both = Work(9.89e9, 6.7e9, 1e6)
    assert roofline_ms(both, h100) == pytest.approx(0.11)
    # memory-bound: 6.7e8 bytes / 3.35e12 B/s = 0.2 ms > 0.1 ms of compute
    assert roofline_ms(Work(0.0, 6.7e9, 6.7e8), h100) == pytest.approx(0.2)


def test_sol_fraction():
    assert sol_fraction(0.2, 0.4) == pytest.approx(0.5)
    assert sol_fraction(None, 0.4) is None and sol_fraction(0.2, 0.0) is None


def test_fp32_matmuls_at_the_tf32_rate_where_the_profile_allows_tf32():
    """A TF32 GEMM (allowed by kernelgym) beat the fp32-rate roofline 2.3-3.4x on an H100: where TF32 is
    allowed, an fp32 matmul's speed of light is the TF32 tensor-core rate (half the fp16 one)."""
    h100 = peak_for("H100 SXM")
    mm = work_of(FP32_MM, 0, 0)
    assert roofline_ms(mm, h100, tf32=False) == pytest.approx(0.1)  # 6.7e9 / 67e12 s
    assert roofline_ms(mm, h100, tf32=True) == pytest.approx(6.7e9 / 494.5e12 * 1e3)
    # the memory-bound rest stays at the fp32 rate: 1e8 flops of relu beside the GEMM
    both = Work(0.0, 6.7e9 + 1e8, 0.0, matmul32_flops=6.7e9)
    assert roofline_ms(both, h100, tf32=True) == pytest.approx((6.7e9 / 494.5e12 + 1e8 / 67e12) * 1e3)
