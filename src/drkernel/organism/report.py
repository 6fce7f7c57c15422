"""Turn organism runs into a table, per-step curves (SVG, no plotting library) and verdicts on the
paper's claims read against the seed spread.

Input: ``organism_suite.json`` bundles or ``organism_run.json`` files (or folders holding them).
Each arm's number is the mean over the last ``tail`` steps of a run; an arm's spread is the range of
that number over seeds, and a claim "A above B" holds only when A's lowest seed is above B's highest.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

METRICS = ("reward_mean", "hack_rate", "hack_paid_rate", "stream_rate", "lazy_rate", "coverage", "fast1",
           "fast1.2", "fused_rate", "valid_rate", "novel_rate")
PLOTTED = ("reward_mean", "hack_rate", "lazy_rate", "coverage", "fast1", "fast1.2")
SUMMARY_SCHEMA = "organism-summary/1"
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


@dataclass(frozen=True)
class Claim:
    text: str
    high_arm: str
    low_arm: str
    metric: str


CLAIMS = (
    Claim("without hack checks, hacks take over (hack rate: nocheck above full)", "nocheck", "full",
          "hack_rate"),
    Claim("without PR/PRS, lazy optimisation settles in (lazy rate: nopr above full)", "nopr", "full",
          "lazy_rate"),
    Claim("PR+PRS raise coverage (coverage: full above nopr)", "full", "nopr", "coverage"),
    Claim("TRLOO beats GRPO on multi-turn (reward: full above grpo)", "full", "grpo", "reward_mean"),
    Claim("fused kernels rise with the full method (Fast@1.2: full above nopr)", "full", "nopr", "fast1.2"),
)


MIN_SEEDS = 2
"""A claim read on fewer seeds per arm has no spread: it can be ordered, never SEPARATED."""


def verdicts(values: dict[str, dict[str, Spread]]) -> list[tuple[Claim, str]]:
    """SEPARATED (A's worst seed above B's best, with at least `MIN_SEEDS` seeds in each arm), SAME-ORDER
    (means ordered; spreads overlap, or one seed), REVERSED or MISSING (an arm did not run)."""
    out = []
    for c in CLAIMS:
        if c.high_arm not in values or c.low_arm not in values:
            out.append((c, "MISSING"))
            continue
        hi, lo = values[c.high_arm][c.metric], values[c.low_arm][c.metric]
        if hi.low > lo.high and min(hi.seeds, lo.seeds) >= MIN_SEEDS:
            out.append((c, "SEPARATED"))
        elif hi.low > lo.high:
            out.append((c, "SAME-ORDER (one seed: no spread to read)"))
        elif hi.mean > lo.mean:
            out.append((c, "SAME-ORDER (spreads overlap)"))
        else:
            out.append((c, "REVERSED"))
    return out


def cut_short(runs: Sequence[dict[str, Any]]) -> list[str]:
    """``arm sN done/planned`` for each run that stopped before its planned steps."""
    out = []
    for r in runs:
        planned = int((r.get("scale") or {}).get("steps", r["steps_done"]))
        if r["steps_done"] < planned:
            out.append(f"{r['arm']} s{r['seed']} {r['steps_done']}/{planned}")
    return out


def curves_svg(runs: Sequence[dict[str, Any]]) -> str:
    """One panel per plotted metric; a line per run (seed 0 solid, other seeds dashed), colour by arm."""
    from drkernel.organism.svg import Panel, Series, chart

    panels = [Panel(m, [Series(f"{r['arm']} s{r['seed']}", COLORS.get(r["arm"], "#555"), curve(r, m),
                               dashed=int(r["seed"]) > 0) for r in runs]) for m in PLOTTED]
    arms = list(dict.fromkeys(r["arm"] for r in runs))
    return chart(panels, legend=[(a, COLORS.get(a, "#555")) for a in arms])


def write_report(paths: Sequence[str | Path], out: Path, tail: int = 3) -> list[str]:
    """Write ``organism_table.md``, ``organism_curves.svg`` and ``organism_summary.json`` to ``out``;
    returns the SUMMARY lines."""
    runs = load_runs(paths)
    if not runs:
        from drkernel.errors import ConfigError

        raise ConfigError(f"no organism runs under {[str(p) for p in paths]}")
    out.mkdir(parents=True, exist_ok=True)
    text, values = table(runs, tail)
    checks = verdicts(values)
    first = runs[0]
    header = (f"Device: {first.get('device_name') or first.get('gym_device')}; date: {first.get('date')}; "
              f"scale: {first['scale']['name']}; numbers: mean [min, max] over seeds of each run's mean over "
              f"its last {tail} steps.\n\n")
    claims = "\n".join(f"- {c.text}: **{v}**" for c, v in checks)
    short = cut_short(runs)
    if short:
        claims += ("\n- runs stopped by the RL budget before their last step (their last-step means come "
                   f"from fewer steps): {', '.join(short)}")
    (out / "organism_table.md").write_text(header + text + "\n\n" + claims + "\n")
    (out / "organism_curves.svg").write_text(curves_svg(runs))
    summary = {"schema": SUMMARY_SCHEMA, "tail": tail,
               "values": {a: {m: vars(s) for m, s in v.items()} for a, v in values.items()},
               "claims": [{"claim": c.text, "verdict": v} for c, v in checks],
               "runs": [{"arm": r["arm"], "seed": r["seed"], "steps_done": r["steps_done"],
                         "wall_seconds": r["wall_seconds"]} for r in runs], "cut_short": short}
    (out / "organism_summary.json").write_text(json.dumps(summary, indent=1))
    shown = ("reward_mean", "hack_rate", "lazy_rate", "fast1.2")
    lines = [f"SUMMARY organism {a}: seeds={values[a]['reward_mean'].seeds} "
             + " ".join(f"{m}={values[a][m].text()}" for m in shown)
             for a in values]
    lines += [f"SUMMARY organism cut short: {run}" for run in short]
    return lines + [f"SUMMARY organism claim: {c.text}: {v}" for c, v in checks]
