"""`drkernel bench report`: a markdown report with plots from a run folder's metrics.json.

Plots: Fast@p against turn (that turn's answer, and the best answer up to it), the outcome breakdown
per turn (lazy correct answers apart), and, only when the run was timed (a GPU), the distribution of
speedups of valid turns and each problem's speed of light (`drkernel.gym.roofline`: the best valid
turn's ``sol_fraction``). Fast@p of the last turns is also given with how many of their speedup
intervals hold p (`drkernel.gym.speedup.fast_p_counts`), read from the run's trajectories.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drkernel.bench.io import read_episodes
from drkernel.bench.metrics import PS, p_key
from drkernel.gym.speedup import fast_p_counts

OUTCOME_ORDER = (
    "correct",
    "correct (lazy)",
    "hacked",
    "incorrect",
    "runtime_error",
    "compile_error",
    "import_error",
    "syntax_error",
    "no_modelnew",
    "signature_mismatch",
    "timeout",
    "crashed",
    "out_of_memory",
    "unsupported_on_cpu",
    "rejected",
    "unparseable",
    "policy_error",
    "no_turn",
)


def _pct(x: float | None) -> str:
    return "n/m" if x is None else f"{100 * x:.1f}"


def _fast_table(rows: Sequence[dict[str, Any]], ps: Sequence[float]) -> list[str]:
    head = "| turn | " + " | ".join(f"Fast@{p:g}" for p in ps) + " |"
    lines = [head, "|" + "---|" * (len(ps) + 1)]
    lines += ["| " + " | ".join([str(r["turn"]), *(_pct(r[p_key(p)]) for p in ps)]) + " |" for r in rows]
    return lines


def _rates_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| turn | correct | valid | hacked | lazy | mean reward |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['turn']} | {_pct(r['correct'])} | {_pct(r['valid'])} | {_pct(r['hacked'])} | {_pct(r['lazy'])} "
        f"| {r['mean_reward']:.3f} |"
        for r in rows
    ]
    return lines


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    _pyplot().close(fig)
    return path


def plot_fast(metrics: dict[str, Any], path: Path, ps: Sequence[float] = PS) -> Path:
    return _save(fast_figure(metrics, ps), path)


def fast_figure(metrics: dict[str, Any], ps: Sequence[float] = PS) -> Any:
    """Fast@p against turn in two panels, that turn's answers and the best answer up to it.

    Two panels rather than solid and dashed lines on one: the two curves often coincide (a valid
    answer is rarely lost on a later turn), and one line then hides the other. Both axes start at 0 %.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), sharey=True)
    turns = [r["turn"] for r in metrics["per_turn"]]
    for ax, kind, title in ((axes[0], "per_turn", "that turn's answer"),
                            (axes[1], "best_by_turn", "best answer up to that turn")):
        for i, p in enumerate(ps):
            vals = [r[p_key(p)] for r in metrics[kind]]
            if any(v is None for v in vals):  # not measured (no timing): no line rather than a false 0
                continue
            ax.plot(turns, [100 * v for v in vals], "-o", color=f"C{i}", label=f"Fast@{p:g}")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("turn")
        ax.set_xticks(turns)
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("% of samples")
    axes[1].legend(fontsize=8, loc="lower right")
    timed = "" if metrics.get("timed") else " (no timing: only Fast@0, valid answers)"
    fig.suptitle(f"Fast@p by turn{timed}", fontsize=11)
    return fig


def plot_speedups(metrics: dict[str, Any], path: Path) -> Path | None:
    speedups = metrics.get("speedups") or []
    if not speedups:
        return None
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    lo, hi = max(min(speedups), 1e-3), max(max(speedups), 1.01)
    ax.hist(speedups, bins=np.geomspace(lo * 0.9, hi * 1.1, 30), color="C0")
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=1, ls=":")
    ax.set_xlabel("speedup over the PyTorch reference (valid turns)")
    ax.set_ylabel("turns")
    ax.set_title("Speedups of valid turns")
    return _save(fig, path)


def sol_by_problem(episodes: Sequence[Any]) -> list[tuple[str, float]]:
    """(problem key, the highest ``sol_fraction`` among its valid turns), for problems that have one."""
    best: dict[str, float] = {}
    for ep in episodes:
        for turn in ep.turns:
            r = turn.result
            if r is not None and r.valid and r.sol_fraction is not None:
                best[ep.problem.key] = max(best.get(ep.problem.key, 0.0), r.sol_fraction)
    return sorted(best.items())


def plot_sol(rows: Sequence[tuple[str, float]], path: Path) -> Path | None:
    """One bar per problem: the share of the speed of light its best valid turn reached."""
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.8 + 0.28 * len(rows)))
    ax.barh([k for k, _ in rows], [v for _, v in rows], color="C2")
    ax.axvline(1.0, color="k", lw=1, ls=":")
    ax.invert_yaxis()
    ax.set_xlabel("sol_fraction = roofline time / measured time (best valid turn)")
    ax.set_title("Speed of light per problem", fontsize=11)
    ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def _uncertain_table(episodes: Sequence[Any], ps: Sequence[float]) -> list[str]:
    """Fast@p on each sample's last turn, and how many of those turns' intervals hold p."""
    points = []
    for ep in episodes:
        r = ep.turns[-1].result if ep.turns else None
        valid = r is not None and r.valid
        points.append((r.speedup if valid else None, r.speedup_ci if valid else None))
    lines = ["| p | fast (point estimate) | p within the interval | samples |", "|---|---|---|---|"]
    for p in ps:
        f = fast_p_counts(points, p)
        lines.append(f"| {p:g} | {f.fast} | {f.uncertain} | {f.total} |")
    return lines


def outcome_shares(metrics: dict[str, Any]) -> list[tuple[str, list[float]]]:
    """(label, % of samples at each turn) per outcome, in OUTCOME_ORDER; lazy correct answers apart.

    A lazy answer (most of the work left to PyTorch) is correct and valid in lenient mode, but it is
    not what the benchmark asks for: counted inside "correct" it would read as a kernel success.
    """
    rows = metrics["per_turn"]
    n = max(1, metrics["samples"])
    counts = [dict(r["outcomes"]) for r in rows]
    for c, r in zip(counts, rows):
        lazy = min(r.get("lazy_correct", 0), c.get("correct", 0))
        if lazy:
            c["correct"] -= lazy
            c["correct (lazy)"] = lazy
    seen = {k for c in counts for k, v in c.items() if v}
    order = [o for o in OUTCOME_ORDER if o in seen] + sorted(seen - set(OUTCOME_ORDER))
    return [(name, [100 * c.get(name, 0) / n for c in counts]) for name in order]


# Fixed colours: green for success, yellow for lazy, reds and greys for the failures.
OUTCOME_COLORS = {"correct": "#2ca02c", "correct (lazy)": "#e6c229", "hacked": "#9467bd",
                  "incorrect": "#d62728", "policy_error": "#7f7f7f", "no_turn": "#c7c7c7"}


def plot_outcomes(metrics: dict[str, Any], path: Path) -> Path:
    return _save(outcomes_figure(metrics), path)


def outcomes_figure(metrics: dict[str, Any]) -> Any:
    """Stacked bars: what each turn's answers came to, as % of samples."""
    plt = _pyplot()
    rows = metrics["per_turn"]
    fig, ax = plt.subplots(figsize=(7.2, 3.8))
    bottom = [0.0] * len(rows)
    turns = [r["turn"] for r in rows]
    others = iter(f"C{i}" for i in (1, 0, 5, 6, 8, 9, 3, 4, 2, 7) * 3)
    for name, vals in outcome_shares(metrics):
        ax.bar(turns, vals, bottom=bottom, label=name, color=OUTCOME_COLORS.get(name) or next(others))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_title(f"Outcome of each turn's answer ({metrics['samples']} samples)", fontsize=11)
    ax.set_xlabel("turn")
    ax.set_ylabel("% of samples")
    ax.set_xticks(turns)
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    return fig


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.md`` and its plots into ``out`` (default: the run folder)."""
    run_dir = Path(run_dir)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    out = Path(out) if out else run_dir
    out.mkdir(parents=True, exist_ok=True)
    lines = [f"# Benchmark report: {run_dir.name}", ""]
    cfg = run.get("config", {})
    if cfg:
        lines += [
            (
                f"- problems: `{cfg.get('problems')}`, policy: `{cfg.get('policy')}`, samples: {cfg.get('samples')}, "
                f"turns: {cfg.get('turns')}, tts: `{cfg.get('tts')}`"
            ),
            "",
        ]
    info = metrics.get("run", {})
    lines += [
        f"- {metrics['samples']} samples over {metrics['problems']} problems, {metrics['turns']} turns at most",
        f"- timing measured: {'yes' if metrics['timed'] else 'no (CPU mode: Fast@p for p > 0 is n/m, not measured)'}",
    ]
    if info.get("episodes_per_min"):
        lines.append(
            f"- throughput: {info['episodes_per_min']:.1f} episodes/min ({info['elapsed_s']:.1f} s for "
            f"{info['episodes_run_now']} episodes, {info['evals']} evaluations in the whole run)"
        )
    lines += [
        "",
        "## Fast@p per turn (%)",
        "",
        *_fast_table(metrics["per_turn"], PS),
        "",
        "## Fast@p, best by turn (%)",
        "",
        *_fast_table(metrics["best_by_turn"], PS),
        "",
        "## Rates per turn (%)",
        "",
        *_rates_table(metrics["per_turn"]),
        "",
    ]
    episodes = _episodes(run_dir) if metrics["timed"] else []
    if episodes:
        lines += ["## Fast@p of the last turns, and its uncertainty", "", *_uncertain_table(episodes, PS), ""]
    if metrics["per_turn"]:
        plots = [
            plot_fast(metrics, out / "fast_by_turn.png"),
            plot_speedups(metrics, out / "speedups.png"),
            plot_outcomes(metrics, out / "outcomes.png"),
            plot_sol(sol_by_problem(episodes), out / "sol_fraction.png"),
        ]
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots if p is not None] + [""]
    for level, sub in (metrics.get("levels") or {}).items():
        if sub["per_turn"]:
            last, best = sub["per_turn"][-1], sub["best_by_turn"][-1]
            lines += [
                f"## Level {level} ({sub['samples']} samples)",
                "",
                *_fast_table(
                    [{**last, "turn": f"{last['turn']}"}, {**best, "turn": f"best@{best['turn']}"}], PS
                ),
                "",
            ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _episodes(run_dir: Path) -> list[Any]:
    """The run's episodes when its trajectories are there (a report may be written from metrics alone)."""
    for name in ("trajectories.jsonl", "trajectories.parquet"):
        if (run_dir / name).exists():
            return read_episodes(run_dir / name)
    return []
