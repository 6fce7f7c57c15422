"""The report's plots say what they show: Fast@p panels from 0 %, titled outcomes with lazy answers apart,
and a speedup histogram only when the run was timed. Metrics come from the real `summarize`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from drkernel.bench.metrics import SampleRecord, summarize
from drkernel.bench.report import fast_figure, outcome_shares, outcomes_figure, write_report
from drkernel.reward import Outcome, TurnScore

BROKEN = TurnScore(outcome=Outcome.SYNTAX_ERROR)
LAZY = TurnScore(correct=True, lazy=True, reward=0.5, outcome=Outcome.CORRECT)
GOLD = TurnScore(correct=True, reward=0.5, outcome=Outcome.CORRECT)


def _metrics(speedup: float | None = None) -> dict:
    gold = GOLD if speedup is None else dataclasses.replace(GOLD, speedup=speedup)
    # Worked by hand, 4 samples: turn 1 = 2 broken, 2 lazy; turn 2 = 1 broken, 1 lazy, 2 gold.
    samples = [SampleRecord("p/a", 1, (BROKEN, BROKEN)), SampleRecord("p/b", 1, (BROKEN, gold)),
               SampleRecord("p/c", 1, (LAZY, LAZY)), SampleRecord("p/d", 1, (LAZY, gold))]
    return summarize(samples)


def test_outcome_shares_keep_lazy_answers_out_of_correct():
    shares = dict(outcome_shares(_metrics()))
    assert shares["correct (lazy)"] == [50.0, 25.0]
    assert shares["correct"] == [0.0, 50.0]
    assert shares["syntax_error"] == [50.0, 25.0]
    assert list(dict(outcome_shares(_metrics()))) == ["correct", "correct (lazy)", "syntax_error"]


def test_fast_panels_start_at_zero_and_show_both_curves():
    fig = fast_figure(_metrics())
    per, best = fig.axes
    assert per.get_ylim()[0] == 0 and best.get_ylim()[0] == 0
    assert "best" in best.get_title() and "that turn" in per.get_title()
    # untimed: only Fast@0 is drawn, once per panel; values are % of samples
    (line_per,), (line_best,) = per.get_lines(), best.get_lines()
    assert list(line_per.get_ydata()) == [50.0, 75.0] and list(line_best.get_ydata()) == [50.0, 75.0]


def test_outcomes_plot_is_titled():
    ax = outcomes_figure(_metrics()).axes[0]
    assert "Outcome" in ax.get_title() and ax.get_ylim() == (0, 100)
    labels = ax.get_legend_handles_labels()[1]
    assert "correct (lazy)" in labels and "correct" in labels


@pytest.mark.parametrize("speedup, histogram", [(None, False), (1.7, True)])
def test_report_mentions_the_speedup_histogram_only_when_made(tmp_path, speedup, histogram):
    (tmp_path / "metrics.json").write_text(json.dumps(_metrics(speedup)))
    report = write_report(tmp_path).read_text()
    assert ("speedups.png" in report) is histogram and (tmp_path / "speedups.png").exists() is histogram
    assert "fast_by_turn.png" in report and (tmp_path / "outcomes.png").exists()


def _episode(key: str, sample: int, speedup: float, ci: tuple[float, float], sol: float):
    from drkernel.agent.episode import Episode, Turn
    from drkernel.gym.result import EvalResult, Status
    from drkernel.problems import Problem

    result = EvalResult(status=Status.CORRECT, speedup=speedup, speedup_ci=ci, sol_fraction=sol).finalize()
    turn = Turn(index=0, context=[], messages=[], response="", code="src", result=result)
    return Episode(Problem(name=key, level=1, code="c"), sample, prompt=[], turns=[turn])


def test_timed_report_plots_sol_fraction_and_counts_open_intervals(tmp_path):
    from drkernel.bench.io import JsonlWriter
    from drkernel.bench.report import sol_by_problem

    episodes = [_episode("a", 0, 1.2, (1.1, 1.3), 0.2), _episode("a", 1, 1.05, (0.95, 1.15), 0.4),
                _episode("b", 0, 0.5, (0.45, 0.55), 0.1)]
    writer = JsonlWriter(tmp_path / "trajectories.jsonl")
    for ep in episodes:
        writer.write(ep)
    writer.close()
    (tmp_path / "metrics.json").write_text(json.dumps(_metrics(1.7)))
    report = write_report(tmp_path).read_text()
    # per problem the best valid turn: a -> 0.4, b -> 0.1
    assert sol_by_problem(episodes) == [(episodes[0].problem.key, 0.4), (episodes[2].problem.key, 0.1)]
    assert "sol_fraction.png" in report and (tmp_path / "sol_fraction.png").exists()
    # Fast@1: 1.2 and 1.05 beat 1 on the point estimate; only (0.95, 1.15) holds 1
    assert "| 1 | 2 | 1 | 3 |" in report
