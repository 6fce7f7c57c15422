"""`drkernel bench report`: a markdown report with plots from a run folder's metrics.json.

Plots: Fast@p against turn (per turn, solid; best-by-turn, dashed), the distribution of speedups of
valid turns, and the outcome breakdown per turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drkernel.bench.metrics import PS, p_key

OUTCOME_ORDER = (
    "correct",
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


def plot_fast(metrics: dict[str, Any], path: Path, ps: Sequence[float] = PS) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    turns = [r["turn"] for r in metrics["per_turn"]]
    for i, p in enumerate(ps):
        per = [r[p_key(p)] for r in metrics["per_turn"]]
        best = [r[p_key(p)] for r in metrics["best_by_turn"]]
        if any(v is None for v in per):
            continue
        color = f"C{i}"
        ax.plot(turns, [100 * v for v in per], "-o", color=color, label=f"Fast@{p:g}")
        ax.plot(turns, [100 * v for v in best], "--", color=color, alpha=0.6)
    ax.set_xlabel("turn")
    ax.set_ylabel("% of samples")
    ax.set_xticks(turns)
    ax.set_title("Fast@p by turn (solid: that turn, dashed: best up to it)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_speedups(metrics: dict[str, Any], path: Path) -> Path | None:
    speedups = metrics.get("speedups") or []
    if not speedups:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    lo, hi = max(min(speedups), 1e-3), max(max(speedups), 1.01)
    ax.hist(speedups, bins=np.geomspace(lo * 0.9, hi * 1.1, 30), color="C0")
    ax.set_xscale("log")
    ax.axvline(1.0, color="k", lw=1, ls=":")
    ax.set_xlabel("speedup over the PyTorch reference (valid turns)")
    ax.set_ylabel("turns")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_outcomes(metrics: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = metrics["per_turn"]
    seen = {k for r in rows for k in r["outcomes"]}
    names = [o for o in OUTCOME_ORDER if o in seen] + sorted(seen - set(OUTCOME_ORDER))
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    bottom = [0.0] * len(rows)
    turns = [r["turn"] for r in rows]
    for i, name in enumerate(names):
        vals = [r["outcomes"].get(name, 0) / max(1, metrics["samples"]) * 100 for r in rows]
        ax.bar(turns, vals, bottom=bottom, label=name, color=f"C{i % 10}")
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xlabel("turn")
    ax.set_ylabel("% of samples")
    ax.set_xticks(turns)
    ax.legend(fontsize=7, bbox_to_anchor=(1.01, 1), loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
    if metrics["per_turn"]:
        plots = [
            plot_fast(metrics, out / "fast_by_turn.png"),
            plot_speedups(metrics, out / "speedups.png"),
            plot_outcomes(metrics, out / "outcomes.png"),
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
