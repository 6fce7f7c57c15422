"""Turn organism runs into a table, per-step curves (SVG, no plotting library) and verdicts on the
paper's claims by their registered tests (`drkernel.organism.claims`).

Input: ``organism_suite.json`` bundles or ``organism_run.json`` files (or folders holding them).
A run's value of a metric is its mean over the last ``tail`` steps; an arm's spread is the mean
[min, max] of that value over seeds; each claim is decided by a one-sided permutation test on the
per-seed values, computed here from the run files (never written by hand).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from drkernel.organism.claims import EXPLORATORY, REGISTERED, TAIL, Claim, Decision, decide, to_json

METRICS = ("reward_mean", "hack_rate", "hack_paid_rate", "stream_rate", "lazy_rate", "coverage", "fast1",
           "fast1.2", "fused_rate", "valid_rate", "novel_rate")
PLOTTED = ("reward_mean", "hack_rate", "lazy_rate", "coverage", "fast1", "fast1.2")
SUMMARY_SCHEMA = "organism-summary/2"
COLORS = {"nocheck": "#d62728", "nopr": "#ff7f0e", "full": "#2ca02c", "grpo": "#1f77b4"}
ARM_ORDER = ("nocheck", "nopr", "full", "grpo")


def load_runs(paths: Iterable[str | Path]) -> list[dict[str, Any]]:
    """Every run in the given bundles, run files or folders (searched recursively), once each."""
    from drkernel.errors import ConfigError

    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise ConfigError(f"no such run file or folder: {path}")
        files = sorted(path.rglob("organism_*.json")) if path.is_dir() else [path]
        for f in files:
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError) as e:
                raise ConfigError(f"{f} is not a readable organism JSON file: {e}") from e
            for run in _runs_in(f, data, named=not path.is_dir()):
                runs[(run["arm"], int(run["seed"]))] = run
    return [runs[k] for k in sorted(runs, key=lambda k: (_arm_rank(k[0]), k[1]))]


def _runs_in(f: Path, data: Any, named: bool) -> list[dict[str, Any]]:
    """The runs of one file by its schema: a suite bundle or a run file. In a searched folder other
    files are skipped (the report's own summary, found again when its folder is searched a second
    time; an SFT policy's ``organism_sft.json``); a file named on its own must be a run or a suite."""
    from drkernel.errors import ConfigError

    schema = str(data.get("schema", "")) if isinstance(data, dict) else ""
    if not schema.startswith(("organism-suite", "organism-run")):
        if named:
            raise ConfigError(f"{f} is not an organism run or suite file (schema {schema!r})")
        return []
    runs = data.get("runs") if schema.startswith("organism-suite") else [data]
    if not isinstance(runs, list):
        raise ConfigError(f"{f}: 'runs' is not a list")
    for run in runs:
        if not isinstance(run, dict) or not {"arm", "seed", "steps"} <= run.keys():
            raise ConfigError(f"{f}: a run without arm, seed and steps")
    return runs


def _arm_rank(arm: str) -> int:
    return ARM_ORDER.index(arm) if arm in ARM_ORDER else len(ARM_ORDER)


def curve(run: dict[str, Any], metric: str) -> list[float]:
    return [float(s.get(f"gym/org/{metric}", math.nan)) for s in run["steps"]]


def final(run: dict[str, Any], metric: str, tail: int) -> float:
    values = [v for v in curve(run, metric)[-tail:] if math.isfinite(v)]
    return sum(values) / len(values) if values else math.nan


@dataclass(frozen=True)
class Spread:
    mean: float
    low: float
    high: float
    seeds: int

    def text(self, digits: int = 2) -> str:
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def spread(values: Sequence[float]) -> Spread:
    vals = [v for v in values if math.isfinite(v)] or [math.nan]
    return Spread(sum(vals) / len(vals), min(vals), max(vals), len(vals))


def by_arm(runs: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        out.setdefault(r["arm"], []).append(r)
    return out


def table(runs: Sequence[dict[str, Any]], tail: int) -> tuple[str, dict[str, dict[str, Spread]]]:
    """Markdown table (mean [min, max] over seeds of each run's last-``tail``-step mean) and its values."""
    arms = by_arm(runs)
    values = {a: {m: spread([final(r, m, tail) for r in rs]) for m in METRICS} for a, rs in arms.items()}
    for a, rs in arms.items():
        values[a]["step1_reward"] = spread([curve(r, "reward_mean")[0] for r in rs if r["steps"]])
        values[a]["heldout_fast1"] = spread([r["heldout_after"].get("gym/heldout/fast1", math.nan)
                                             for r in rs])
    cols = ("step1_reward",) + METRICS + ("heldout_fast1",)
    lines = ["| arm | seeds | steps | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 3)]
    for a, rs in arms.items():
        steps = "/".join(str(r["steps_done"]) for r in rs)
        lines.append(f"| {a} | {len(rs)} | {steps} | " + " | ".join(values[a][c].text() for c in cols) + " |")
    return "\n".join(lines), values


def per_seed(runs: Sequence[dict[str, Any]], metric: str, tail: int) -> dict[str, dict[int, float]]:
    """``{arm: {seed: run's mean of metric over its last tail steps}}``."""
    out: dict[str, dict[int, float]] = {}
    for r in runs:
        out.setdefault(r["arm"], {})[int(r["seed"])] = final(r, metric, tail)
    return out


def decisions(runs: Sequence[dict[str, Any]], tail: int,
              claims: Sequence[Claim] = REGISTERED) -> list[Decision]:
    """Each claim decided by its registered test on the runs' per-seed values."""
    return [decide(c, per_seed(runs, c.metric, tail)) for c in claims]


def seed_table(runs: Sequence[dict[str, Any]], tail: int) -> str:
    """Markdown: one row per run with the registered claims' metrics (the values the tests read)."""
    metrics = list(dict.fromkeys(c.metric for c in REGISTERED + EXPLORATORY))
    lines = ["| arm | seed | steps | " + " | ".join(metrics) + " |", "|" + "---|" * (len(metrics) + 3)]
    for r in runs:
        lines.append(f"| {r['arm']} | {r['seed']} | {r['steps_done']} | "
                     + " | ".join(f"{final(r, m, tail):.3f}" for m in metrics) + " |")
    return "\n".join(lines)


def cut_short(runs: Sequence[dict[str, Any]]) -> list[str]:
    """``arm sN done/planned`` for each run that stopped before its planned steps."""
    out = []
    for r in runs:
        planned = int((r.get("scale") or {}).get("steps", r["steps_done"]))
        if r["steps_done"] < planned:
            out.append(f"{r['arm']} s{r['seed']} {r['steps_done']}/{planned}")
    return out


def curves_svg(runs: Sequence[dict[str, Any]]) -> str:
    """One panel per plotted metric; a line per run (each arm's first seed solid, the others dashed),
    colour by arm."""
    from drkernel.organism.svg import Panel, Series, chart

    first = {a: min(int(r["seed"]) for r in rs) for a, rs in by_arm(runs).items()}
    panels = [Panel(m, [Series(f"{r['arm']} s{r['seed']}", COLORS.get(r["arm"], "#555"), curve(r, m),
                               dashed=int(r["seed"]) != first[r["arm"]]) for r in runs]) for m in PLOTTED]
    arms = list(dict.fromkeys(r["arm"] for r in runs))
    return chart(panels, legend=[(a, COLORS.get(a, "#555")) for a in arms])


def bias_rows(runs: Sequence[dict[str, Any]]) -> dict[str, dict[int, dict[str, float]]]:
    """Per arm and turn: GRPO's measured shrinkage against TRLOO (`drkernel.organism.bias`), the
    mean over every step of every run of ``n_t``, ``grpo_slope_t`` and ``grpo_expected_t``."""
    out: dict[str, dict[int, dict[str, float]]] = {}
    for arm, rs in by_arm(runs).items():
        turns = sorted({int(k.rsplit("_t", 1)[1]) for r in rs for st in r["steps"] for k in st
                        if k.startswith("gym/org/adv/n_t")})
        for t in turns:
            row = {}
            for name in ("n", "grpo_slope", "grpo_expected"):
                vals = [float(st[f"gym/org/adv/{name}_t{t}"]) for r in rs for st in r["steps"]
                        if math.isfinite(float(st.get(f"gym/org/adv/{name}_t{t}", math.nan)))]
                row[name] = sum(vals) / len(vals) if vals else math.nan
            out.setdefault(arm, {})[t] = row
    return out


def bias_text(rows: dict[str, dict[int, dict[str, float]]]) -> str:
    """Markdown: the runs' per-turn GRPO shrinkage next to the toy simulation's."""
    from drkernel.organism.bias import TOY_GRPO_SLOPE

    lines = [("| arm | turn | mean N_t | GRPO/TRLOO slope (measured) | mean (N_t - 1)/N_t | toy simulation slope "
              "(N = 16, stop 0.1) |"), "|---|---|---|---|---|---|"]
    for arm, turns in rows.items():
        for t, v in turns.items():
            toy = f"{TOY_GRPO_SLOPE[t - 1]:.3f}" if t <= len(TOY_GRPO_SLOPE) else "-"
            lines.append(f"| {arm} | {t} | {v['n']:.2f} | {v['grpo_slope']:.3f} | {v['grpo_expected']:.3f} | {toy} |")
    return "\n".join(lines)


def _seeds_text(runs: Sequence[dict[str, Any]]) -> str:
    return "; ".join(f"{a}: {', '.join(str(r['seed']) for r in rs)}" for a, rs in by_arm(runs).items())


def write_report(paths: Sequence[str | Path], out: Path, tail: int = TAIL) -> list[str]:
    """Write ``organism_table.md``, ``organism_curves.svg`` and ``organism_summary.json`` to ``out``;
    returns the SUMMARY lines."""
    runs = load_runs(paths)
    if not runs:
        from drkernel.errors import ConfigError

        raise ConfigError(f"no organism runs under {[str(p) for p in paths]}")
    out.mkdir(parents=True, exist_ok=True)
    text, values = table(runs, tail)
    registered, exploratory = decisions(runs, tail), decisions(runs, tail, EXPLORATORY)
    bias = bias_rows(runs)
    first = runs[0]
    header = (f"Device: {first.get('device_name') or first.get('gym_device')}; date: {first.get('date')}; "
              f"scale: {first['scale']['name']}; seeds: {_seeds_text(runs)}. A run's value is its mean over "
              f"its last {tail} steps; the table gives mean [min, max] over seeds.\n\n")
    claims = ("Registered claims (one-sided permutation test on the per-seed values, decided in code):\n"
              + "\n".join(f"- {d.line()}" for d in registered)
              + "\n\nExploratory (same test, not registered):\n" + "\n".join(f"- {d.line()}" for d in exploratory))
    short = cut_short(runs)
    if short:
        claims += ("\n- runs stopped by the RL budget before their last step (their last-step means come "
                   f"from fewer steps): {', '.join(short)}")
    body = (header + text + "\n\n" + claims + "\n\nPer seed:\n\n" + seed_table(runs, tail)
            + "\n\nGRPO's self-inclusion shrinkage per turn, measured on every step's rows:\n\n"
            + bias_text(bias) + "\n")
    (out / "organism_table.md").write_text(body)
    (out / "organism_curves.svg").write_text(curves_svg(runs))
    summary = {"schema": SUMMARY_SCHEMA, "tail": tail,
               "seeds": {a: [r["seed"] for r in rs] for a, rs in by_arm(runs).items()},
               "values": {a: {m: vars(s) for m, s in v.items()} for a, v in values.items()},
               "claims": [to_json(d) for d in registered], "exploratory": [to_json(d) for d in exploratory],
               "advantage_bias": {a: {str(t): v for t, v in turns.items()} for a, turns in bias.items()},
               "runs": [{"arm": r["arm"], "seed": r["seed"], "steps_done": r["steps_done"],
                         "wall_seconds": r["wall_seconds"]} for r in runs], "cut_short": short}
    (out / "organism_summary.json").write_text(json.dumps(summary, indent=1))
    shown = ("reward_mean", "hack_rate", "lazy_rate", "fast1.2")
    lines = [f"SUMMARY organism {a}: seeds={values[a]['reward_mean'].seeds} "
             + " ".join(f"{m}={values[a][m].text()}" for m in shown)
             for a in values]
    lines += [f"SUMMARY organism cut short: {run}" for run in short]
    lines += [f"SUMMARY organism advantage bias {a} turn {t}: N_t {v['n']:.2f} GRPO/TRLOO slope "
              f"{v['grpo_slope']:.3f} (expected {v['grpo_expected']:.3f})" for a, turns in bias.items()
              for t, v in turns.items()]
    lines += [f"SUMMARY organism claim: {d.line()}" for d in registered]
    return lines + [f"SUMMARY organism exploratory: {d.line()}" for d in exploratory]
