import pytest

from drkernel.errors import ConfigError
from drkernel.gym import SCHEMA_VERSION, EvalConfig, EvalRequest, EvalResult, Hack, Status, TimingStats, TrialResult
from drkernel.gym.result import Provenance
from drkernel.problems import Problem


def test_result_round_trips_through_json():
    r = EvalResult(status=Status.CORRECT, problem_key="builtin/L1/gelu",
                   hacks=[Hack(code=7, name="side_stream", evidence="wall 3x events", message="m", strict_only=True)],
                   trials=[TrialResult(trial=0, seed=0, passed=True, max_abs_err=1e-6)],
                   sol_timing=TimingStats(median_ms=1.0, iqr_ms=0.1, cv=0.01, mean_ms=1.0, min_ms=0.9, n=100))
    r.finalize()
    back = EvalResult.from_json(r.to_json())
    assert back == r
    assert back.schema_version == SCHEMA_VERSION == 2


def test_v2_fields_round_trip_and_a_v1_result_still_reads():
    prov = Provenance(gpu_model="NVIDIA H100 80GB HBM3", clocks_start={"sm_mhz": 1980.0}, precision="fp32",
                      reference_flags={"cuda.matmul.allow_tf32": False}, seeds={"trials": [1, 2]})
    r = EvalResult(status=Status.CORRECT, speedup=1.5, speedup_ci=(1.2, 1.8), speedup_ci_level=0.95,
                   roofline_ms=0.1, sol_fraction=0.25, provenance=prov).finalize()
    back = EvalResult.from_json(r.to_json())
    assert back == r and back.speedup_ci == (1.2, 1.8) and back.provenance.clocks_start == {"sm_mhz": 1980.0}
    v1 = {"status": "correct", "schema_version": 1, "speedup": 2.0, "problem_key": "k"}
    old = EvalResult.from_dict(v1)
    assert old.schema_version == 1 and old.provenance is None and old.speedup_ci is None and old.speedup == 2.0


def test_verdict_modes_differ_on_strict_only_hacks():
    hack = Hack(code=2, name="pytorch_passthrough", evidence="aten::mm", message="m", strict_only=True)
    lenient = EvalResult(status=Status.CORRECT, hacks=[hack]).finalize()
    strict = EvalResult(status=Status.CORRECT, hacks=[hack], verdict_mode="strict").finalize()
    assert lenient.valid and lenient.valid_lenient and not lenient.valid_strict
    assert not strict.valid and strict.valid_lenient and not strict.valid_strict


def test_failure_status_is_not_valid():
    r = EvalResult(status=Status.COMPILE_ERROR).finalize()
    assert r.compiled is False and r.correct is False and r.valid is False


def test_newer_schema_is_refused():
    with pytest.raises(ValueError):
        EvalResult.from_dict({"status": "correct", "schema_version": 99})


def test_config_rejects_bad_values_naming_each():
    with pytest.raises(ConfigError) as e:
        EvalConfig(tolerance="loose", trials=0)
    assert "tolerance='loose'" in str(e.value) and "trials=0" in str(e.value)
    with pytest.raises(ConfigError):
        EvalConfig.from_dict({"trails": 3})


def test_content_hash_depends_on_solution_config_and_device():
    p = Problem(name="x", level=1, code="c")
    a = EvalRequest(problem=p, solution="s")
    assert a.content_hash("H100") == EvalRequest(problem=p, solution="s").content_hash("H100")
    assert a.content_hash("H100") != a.content_hash("H200")
    assert a.content_hash() != EvalRequest(problem=p, solution="t").content_hash()
    assert a.content_hash() != EvalRequest(problem=p, solution="s", config=EvalConfig(trials=3)).content_hash()
    assert EvalRequest.from_dict(a.to_dict()) == a
