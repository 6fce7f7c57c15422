"""The toy simulation in benchmarks/ (not a package module), run small."""

import importlib.util
from pathlib import Path

import pytest
import torch

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "toy_advantage_simulation.py"


@pytest.fixture(scope="module")
def toy():
    spec = importlib.util.spec_from_file_location("toy_advantage_simulation", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result(toy):
    return toy.simulate(num_groups=2000, seed=0)


def test_exact_gradient_matches_finite_differences(toy):
    theta = 0.5 * torch.randn(3, 2, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    grad = toy.exact_gradient(theta)
    h = 1e-6
    for index in [(0, 0, 0), (1, 1, 2), (2, 0, 1)]:
        bump = torch.zeros_like(theta)
        bump[index] = h
        numeric = (toy.exact_values(theta + bump)[0, 0] - toy.exact_values(theta - bump)[0, 0]) / (2 * h)
        assert grad[index].item() == pytest.approx(numeric.item(), abs=1e-8)


def test_trloo_is_unbiased(result):
    trloo = result.estimators["TRLOO"]
    assert all(s == pytest.approx(1.0, abs=0.03) for s in trloo.slope_per_turn)
    assert trloo.grad_rel_bias < 3 * trloo.grad_rel_bias_se


def test_grpo_is_shrunk_by_group_size(result):
    # Slope (N_t - 1) / N_t with N_t = 16 at turn 1 (15/16 = 0.9375) and smaller after it.
    grpo = result.estimators["GRPO (self-inclusive)"]
    assert result.grpo_expected_slope[0] == pytest.approx(15 / 16)
    for measured, expected in zip(grpo.slope_per_turn, result.grpo_expected_slope, strict=True):
        assert measured == pytest.approx(expected, abs=0.02)
    assert grpo.slope_per_turn[0] < result.estimators["TRLOO"].slope_per_turn[0] - 0.03


def test_ordering_of_the_alternatives(result):
    trloo = result.estimators["TRLOO"]
    # Trajectory RLOO: unbiased weighting too, but more variance (earlier turns' rewards ride along).
    rloo = result.estimators["trajectory RLOO"]
    assert all(s == pytest.approx(1.0, abs=0.03) for s in rloo.slope_per_turn)
    assert rloo.grad_variance > 1.1 * trloo.grad_variance
    # Turn-independent: ignores later turns, so early-turn credit and the gradient are far off.
    independent = result.estimators["turn-independent"]
    assert independent.slope_per_turn[0] < 0.5
    assert independent.grad_rel_bias > 10 * independent.grad_rel_bias_se


def test_table_and_plot(toy, result, tmp_path, capsys):
    toy.print_table(result)
    assert "TRLOO" in capsys.readouterr().out
    toy.plot(result, tmp_path / "toy.png")
    assert (tmp_path / "toy.png").stat().st_size > 0
