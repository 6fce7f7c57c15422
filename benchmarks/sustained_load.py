"""Sustained load: evaluations per GPU-second when work arrives faster than the device can take it.

The workload is mixed like an RL batch: the built-in suite's solutions (gold, lazy, slow, broken) at
full size, plus our Triton solutions of three KernelBench problems (19_ReLU, 23_Softmax,
12_Gemm_Multiply_LeakyReLU), and failing variants made from the golds (wrong outputs, a kernel that
does not compile) so that about ``--fail-fraction`` of the evaluations fail, as early RL batches do.
Every request draws secret trial seeds (``EvalConfig.seed`` None), as in training; the reference-timing
cache stays on, as in training, keyed by the public reference seed, so a problem's reference is timed
once. (Before 2026-11-24 the requests carried explicit seeds ``seed * 100000 + k``: each one keyed the
reference timing apart, so every correct evaluation timed its reference again, which no RL run does.)

A producer keeps ``2 x concurrency`` requests outstanding until ``--duration-s`` has passed, then
waits for what is in flight. Reported:

* evaluations/s over the whole run, and per status;
* the GPU's busy fraction (``nvidia-smi`` utilisation sampled every 100 ms; absent on CPU);
* time per stage (the sum over evaluations of ``EvalResult.stage_seconds``, and its share);
* latency p50/p95 from submission to result, and service time p50/p95 (the evaluation alone);
* the speedup's coefficient of variation per problem over its repeated gold evaluations, and its median;
* the seconds each evaluation held the device exclusively (``exclusive``: its timed region, and a
  reference's timing where it timed one), mean, p50 and p95: every other candidate waits meanwhile.

``--timing-rule`` picks when the timed calls stop (`EvalConfig.timing_rule`, adaptive by default);
``--ab`` runs the mix twice in one process, adaptive then fixed, side by side on one device
(``sustained_load.json``, ``sustained_load_fixed.json``, ``sustained_ab.png`` and SUMMARY lines
comparing rates, exclusive seconds and each problem's median speedup). ``--ab-candidate`` runs the mix
under the settings named (the defaults) and then under a candidate configuration (`CANDIDATE`: the compile
cache on, more slots and judges, batched timed regions; ``--candidate-*`` change it), side by side in one
process (``sustained_load.json``, ``sustained_load_candidate.json``, ``sustained_ab.png``; SUMMARY
lines ``sustained_cc``: rates, GPU busy, exclusive seconds, stage seconds per evaluation, speedup CVs,
median gold speedups, and whether every solution earned the same verdicts in both, which fails the run
when not). ``--compile-cache``, ``--judge-routing`` and ``--region-batch`` set the evaluator's options
for a single run.

    PYTHONPATH=src python3 benchmarks/sustained_load.py --device cuda:0 --out out/sustained_load
    PYTHONPATH=src python3 benchmarks/sustained_load.py --device cpu --duration-s 60 --quick   # smoke run
    PYTHONPATH=src python3 benchmarks/sustained_load.py --ab-candidate --concurrency 8 --pool-size 8 \
        --warm-references --duration-s 120 --out out/sustained_cc          # scripts/gpu_check.sh sustained-cc

Writes ``sustained_load.json`` and ``sustained_load.png`` (completions over time, latency histogram,
stage shares) into ``--out``; ``--replot`` redraws from the JSON. Needs only torch, triton, numpy
(matplotlib for the plot, skipped when absent).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from drkernel.errors import InfrastructureError
from drkernel.gym import EvalConfig, EvalRequest, InProcessEvaluator
from drkernel.gym.config import TIMING_RULES
from drkernel.gym.orchestrator.judge_pool import JUDGE_ROUTINGS
from drkernel.problems import builtin_solution, find_problem, load_builtin, load_rows

REPO = Path(__file__).resolve().parents[1]
ROWS = REPO / "tests" / "data" / "kernelbench_level1_level2.jsonl"
SOLUTIONS = REPO / "tests" / "gym" / "solutions"
KERNELBENCH = {"19_ReLU": "relu_19.py", "23_Softmax": "softmax_23.py",
               "12_Gemm_Multiply_LeakyReLU": "gemm_multiply_leakyrelu_12.py"}


@dataclass(frozen=True)
class Item:
    """One entry of the workload: a problem, a solution source and the label it should earn."""

    problem: object
    source: str
    label: str  # gold, lazy, slow, broken, wrong (made incorrect), nocompile (made not to compile)


def wrong_variant(source: str) -> str:
    """The gold with outputs off by 50 %: correct shapes, wrong values (fails its first trial)."""
    renamed = re.sub(r"\bclass ModelNew\b", "class GoldModelNew", source)
    return renamed + (
        "\n\nclass ModelNew(GoldModelNew):\n"
        "    def forward(self, *args):\n"
        "        return super().forward(*args) * 1.5\n")


def nocompile_variant(source: str) -> str | None:
    """The gold with a static assertion that fails in its first kernel (a Triton compile error)."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in node.decorator_list):
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and len(node.body) > 1:
                first = node.body[1]  # after the docstring
            lines = source.splitlines()
            indent = " " * first.col_offset
            return "\n".join(lines[:first.lineno - 1] + [indent + "tl.static_assert(False)"] + lines[first.lineno - 1:])
    return None


def workload(fail_fraction: float, seed: int, levels: list[int]) -> tuple[list[Item], list[Item]]:
    """(passing-ish items, failing items). Labels: the suite's own, plus made-up failures."""
    ok, failing = [], []
    for p in load_builtin(levels):
        for name, label in p.metadata.get("solutions", {}).items():
            src = builtin_solution(p, name)
            (failing if label == "broken" else ok).append(Item(p, src, label))
            if label == "gold":
                failing.append(Item(p, wrong_variant(src), "wrong"))
                nc = nocompile_variant(src)
                if nc:
                    failing.append(Item(p, nc, "nocompile"))
    rows = load_rows(ROWS)
    for name, fname in KERNELBENCH.items():
        ok.append(Item(find_problem(rows, name), (SOLUTIONS / fname).read_text(), "gold"))
    return ok, failing


def draw(ok: list[Item], failing: list[Item], fail_fraction: float, rng: random.Random) -> Item:
    return rng.choice(failing) if rng.random() < fail_fraction else rng.choice(ok)


class GpuBusy:
    """Samples ``nvidia-smi``'s utilisation.gpu every 100 ms in the background (None without one)."""

    def __init__(self, index: int) -> None:
        self.samples: list[float] = []
        cmd = ["nvidia-smi", f"--id={index}", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
               "-lms", "100"]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.samples.append(float(line.strip()))
            except ValueError:
                pass

    def stop(self) -> float | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        return statistics.mean(self.samples) / 100 if self.samples else None


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


@dataclass(frozen=True)
class Arm:
    """The evaluator's settings for one run of the mix (``compile_cache``: a fresh, empty cache folder)."""

    concurrency: int
    pool_size: int
    judges: int = 0
    judge_routing: str = "sticky"
    compile_cache: bool = False
    timing_rule: str = EvalConfig.timing_rule
    region_batch: tuple[int, float] | None = None

    @classmethod
    def of(cls, args: argparse.Namespace) -> "Arm":
        """The settings the command line names (the single run's, or the A/B's first arm)."""
        return cls(args.concurrency, args.pool_size, args.judges, args.judge_routing, args.compile_cache,
                   args.timing_rule, batch_of(args.region_batch))


def batch_of(values: list[float] | None) -> tuple[int, float] | None:
    """``--region-batch K T`` as `InProcessEvaluator`'s ``region_batch`` (K 0: none)."""
    if not values or int(values[0]) <= 0:
        return None
    return int(values[0]), float(values[1])


@contextlib.contextmanager
def evaluator(args: argparse.Namespace, arm: Arm) -> Iterator[InProcessEvaluator]:
    """The run's evaluator, with a compile cache of its own (emptied afterwards) when the arm has one."""
    with contextlib.ExitStack() as stack:
        cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="drkernel-cc-")) if arm.compile_cache else None
        yield stack.enter_context(InProcessEvaluator(
            device=args.device, concurrency=arm.concurrency, pool_size=arm.pool_size, judges=arm.judges,
            judge_routing=arm.judge_routing, compile_cache_dir=cache, region_batch=arm.region_batch))


def run(args, arm: Arm | None = None) -> dict:
    arm = arm or Arm.of(args)
    rng = random.Random(args.seed)
    ok, failing = workload(args.fail_fraction, args.seed, args.levels)
    cfg = EvalConfig(device=args.device, trials=args.trials, warmup_calls=args.warmup, timed_calls=args.timed,
                     timing_rule=arm.timing_rule)
    rows: list[dict] = []
    gpu_index = int(args.device.split(":")[1]) if args.device.startswith("cuda:") else 0
    warm_s = None
    concurrency = arm.concurrency
    with evaluator(args, arm) as ev:
        warm = time.monotonic()
        ev.evaluate(EvalRequest(problem=ok[0].problem, solution=ok[0].source, config=cfg))  # judge + pool up
        print(f"warm-up evaluation: {time.monotonic() - warm:.1f} s", flush=True)
        if args.warm_references:  # as an RL run does at start: every problem prepared, its reference timed
            warm = time.monotonic()
            problems = list({item.problem.key: item.problem for item in ok + failing}.values())
            ev.warm(problems, cfg)
            warm_s = time.monotonic() - warm
            print(f"references of {len(problems)} problems prepared and timed: {warm_s:.1f} s", flush=True)
        busy = GpuBusy(gpu_index) if args.device.startswith("cuda") else None
        judged = ev.device_info()["judge_busy_s"]
        t0 = time.monotonic()

        def one(item: Item, k: int) -> dict:
            submitted = time.monotonic()
            outcome = {"status": "infrastructure_error", "valid": False, "speedup": None, "stages": {}}
            try:
                r = ev.evaluate(EvalRequest(problem=item.problem, solution=item.source, config=cfg))
                outcome = {"status": r.status.value, "valid": r.valid, "speedup": r.speedup,
                           "stages": r.stage_seconds}
            except InfrastructureError as e:  # the gym's failure, not the solution's: counted, not fatal
                print(f"  infrastructure error on {item.problem.name}: {str(e).splitlines()[0][:200]}", flush=True)
            done = time.monotonic()
            return {"problem": item.problem.name, "label": item.label, **outcome, "submitted_s": submitted - t0,
                    "done_s": done - t0, "latency_s": done - submitted}

        with ThreadPoolExecutor(max_workers=2 * concurrency) as pool:
            pending, k = set(), 0
            while time.monotonic() - t0 < args.duration_s or pending:
                while time.monotonic() - t0 < args.duration_s and len(pending) < 2 * concurrency:
                    pending.add(pool.submit(one, draw(ok, failing, args.fail_fraction, rng), k))
                    k += 1
                finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for f in finished:
                    rows.append(f.result())
                    if len(rows) % 10 == 0:
                        rate = len(rows) / (time.monotonic() - t0)
                        print(f"  {len(rows)} evaluations, {rate:.2f}/s", flush=True)
        wall = time.monotonic() - t0
        busy_fraction = busy.stop() if busy else None
        info = ev.device_info()
    # each judge's share of the run spent answering requests (a judge that started late counts from 0)
    info["judge_busy_fraction"] = [round((b - (judged[i] if i < len(judged) else 0.0)) / wall, 3)
                                   for i, b in enumerate(info["judge_busy_s"])]
    summary = summarize(rows, wall, busy_fraction, args, info)
    summary["warm_references_s"] = warm_s
    summary["setting"] = dataclasses.asdict(arm)
    summary["timing_rule"] = arm.timing_rule
    return summary


ORCHESTRATOR_STAGES = ("static_checks", "prepare", "child_wait", "candidate", "child_exit", "judge_release",
                       "reference_lock_wait", "reference_timing")
"""Stages on an evaluation's critical path, one after the other (``candidate`` is split below)."""
CANDIDATE_STAGES = ("inputs", "import", "compile", "correctness", "extra_runs", "timed_inputs", "timing",
                    "timing_samples", "timing_lock_wait")
"""The candidate's own stages, inside ``candidate``; ``integrity.*`` are inside ``extra_runs`` and
``child_start`` (a warm child starting in the background) is off the critical path.
``timing_lock_wait`` (the candidate waiting for the exclusive timed region) is measured by the
orchestrator between two of the candidate's stages. ``judge_compare`` (its exports waiting on the
judge: queue and comparison) lies inside ``compile``, ``correctness``, ``extra_runs`` and
``timing_samples``, so it is reported beside the critical path (``overlapping``), not in it; so is
``exclusive`` (the device held exclusively: the candidate's timed region, inside ``timing``, and a
reference's timing, inside ``reference_timing``), the time every other candidate on the device waits."""
OVERLAPPING = ("judge_compare", "child_start", "exclusive")


def critical_path(stages: dict[str, float]) -> dict[str, float]:
    """One evaluation's stages as disjoint parts of its wall time: the orchestrator's, with
    ``candidate`` replaced by the candidate's own stages and the rest of its wall (``candidate_other``)."""
    out = {k: stages[k] for k in ORCHESTRATOR_STAGES if k in stages and k != "candidate"}
    parts = {k: stages[k] for k in CANDIDATE_STAGES if k in stages}
    out.update(parts)
    if "candidate" in stages:
        out["candidate_other"] = max(0.0, stages["candidate"] - sum(parts.values()))
    return out


def summarize(rows: list[dict], wall: float, busy: float | None, args, info: dict) -> dict:
    stages: dict[str, float] = defaultdict(float)
    for r in rows:
        for k, v in critical_path(r["stages"] or {}).items():
            stages[k] += v
    background = sum((r["stages"] or {}).get("child_start", 0.0) for r in rows)
    overlapping = {k: sum((r["stages"] or {}).get(k, 0.0) for r in rows) for k in OVERLAPPING}
    total_stage = sum(stages.values()) or 1.0
    by_problem: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if r["label"] == "gold" and r["valid"] and r["speedup"]:
            by_problem[r["problem"]].append(r["speedup"])
    cvs = {p: statistics.pstdev(v) / statistics.mean(v) for p, v in by_problem.items() if len(v) > 1}
    exclusive = [(r["stages"] or {}).get("exclusive", 0.0) for r in rows]
    lat = [r["latency_s"] for r in rows]
    failing = sum(1 for r in rows if not r["valid"])
    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "device": info,
        "args": {k: v for k, v in vars(args).items() if k != "func"},
        "evaluations": len(rows), "wall_s": wall, "evals_per_s": len(rows) / wall if wall else None,
        "failing_fraction": failing / len(rows) if rows else None,
        "statuses": dict(Counter(r["status"] for r in rows)), "labels": dict(Counter(r["label"] for r in rows)),
        "gpu_busy_fraction": busy, "latency_p50_s": pct(lat, 0.5), "latency_p95_s": pct(lat, 0.95),
        "stage_seconds": dict(sorted(stages.items(), key=lambda kv: -kv[1])),
        "child_start_s_background": background, "overlapping_stage_seconds": overlapping,
        "stage_share": {k: v / total_stage for k, v in sorted(stages.items(), key=lambda kv: -kv[1])},
        "timing_rule": args.timing_rule, "exclusive_s_per_eval": statistics.mean(exclusive) if rows else None,
        "exclusive_s_p50": pct(exclusive, 0.5), "exclusive_s_p95": pct(exclusive, 0.95),
        "speedup_median": {p: statistics.median(v) for p, v in by_problem.items()},
        "speedup_cv": cvs, "speedup_cv_max": max(cvs.values()) if cvs else None, "rows": rows,
    }


def add_workload_args(ap: argparse.ArgumentParser) -> None:
    """The mix's options (failing share, levels, seed) and the evaluations' (trials, warm-up and timed
    calls; ``--quick`` for a CPU smoke run)."""
    ap.add_argument("--fail-fraction", type=float, default=0.4)
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--timed", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="CPU smoke run: fewer trials and calls")


def pyplot():
    """matplotlib's pyplot without a display, or None (and a line saying so) where it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return None
    return plt


def plot(summary: dict, path: Path) -> None:
    plt = pyplot()
    if plt is None:
        return
    rows = sorted(summary["rows"], key=lambda r: r["done_s"])
    fig, (a, b, c) = plt.subplots(1, 3, figsize=(16, 4.5))
    a.plot([r["done_s"] for r in rows], range(1, len(rows) + 1), color="tab:blue")
    a.set(xlabel="seconds since start", ylabel="evaluations finished",
          title=f"{summary['evals_per_s']:.2f} evaluations/s"
                + (f", GPU busy {summary['gpu_busy_fraction']:.0%}" if summary["gpu_busy_fraction"] else ""))
    a.set_ylim(bottom=0)
    a.grid(alpha=0.3)
    b.hist([r["latency_s"] for r in rows], bins=30, color="tab:orange")
    b.axvline(summary["latency_p50_s"], color="k", linestyle="--", label="p50")
    b.axvline(summary["latency_p95_s"], color="tab:red", linestyle="--", label="p95")
    b.set(xlabel="submission to result (s)", ylabel="evaluations", title="latency")
    b.legend()
    share = list(summary["stage_share"].items())[:10]
    c.barh([k for k, _ in share][::-1], [v for _, v in share][::-1], color="tab:green")
    c.set(xlabel="share of the evaluations' summed wall time", title="where the time goes (critical path)")
    fig.suptitle(f"sustained load, {summary['device'].get('device_name', summary['args']['device'])}, "
                 f"{summary['failing_fraction']:.0%} failing")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def plot_ab(runs: dict[str, dict], path: Path, title: str) -> None:
    """Completions over time of the runs side by side (``--ab``), one curve each."""
    plt = pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, summary in runs.items():
        done = sorted(r["done_s"] for r in summary["rows"])
        ax.plot(done, range(1, len(done) + 1), label=f"{name}: {summary['evals_per_s']:.2f}/s, "
                                                    f"{summary['exclusive_s_per_eval'] or 0:.3f} s exclusive")
    ax.set(xlabel="seconds since start", ylabel="evaluations finished",
           title=f"sustained load: {title}")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def report(summary: dict, name: str) -> None:
    keys = ("evaluations", "wall_s", "evals_per_s", "failing_fraction", "gpu_busy_fraction", "latency_p50_s",
            "latency_p95_s", "speedup_cv_max", "exclusive_s_per_eval", "exclusive_s_p95")
    for k in keys:
        print(f"SUMMARY {name} {k}: {summary[k]}")
    print(f"SUMMARY {name} statuses:", summary["statuses"])
    print(f"SUMMARY {name} judge busy:", summary["device"].get("judge_busy_fraction"))
    top = list(summary["stage_seconds"].items())[:6]
    print(f"SUMMARY {name} top stages:", {k: round(v, 1) for k, v in top})
    print(f"SUMMARY {name} overlapping:",
          {k: round(v, 1) for k, v in summary["overlapping_stage_seconds"].items()})


CANDIDATE = {"concurrency": 16, "pool_size": 12, "judges": 4, "judge_routing": "sticky", "compile_cache": True,
             "region_batch": [6, 3.0]}
"""The configuration ``--ab-candidate`` sets against the defaults: the fastest the schedule replay of the
2026-11-26 H100 run predicts, short of more judges than 4 (docs/BENCHMARKS.md, "Compile cache, slots,
judges and batched regions replayed"); each ``--candidate-*`` option overrides one field."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--pool-size", type=int, default=4)
    ap.add_argument("--judges", type=int, default=0, help="judges per device (0: the gym's default)")
    ap.add_argument("--judge-routing", choices=JUDGE_ROUTINGS, default="sticky",
                    help="InProcessEvaluator(judge_routing=): a job's requests to one judge, or to any free one")
    ap.add_argument("--compile-cache", action="store_true",
                    help="InProcessEvaluator(compile_cache_dir=) a fresh folder: a repeated solution loads what an "
                         "earlier evaluation of it compiled")
    ap.add_argument("--region-batch", type=float, nargs=2, metavar=("K", "T"), default=None,
                    help="InProcessEvaluator(region_batch=(K, T)): waiting timed regions block new sessions once K "
                         "wait or the oldest has waited T s (K 0: not batched)")
    ap.add_argument("--timing-rule", choices=TIMING_RULES, default=EvalConfig.timing_rule,
                    help="when the timed calls stop (EvalConfig.timing_rule)")
    ap.add_argument("--ab", action="store_true",
                    help="run the mix twice in one process, the adaptive timing rule then the fixed one (side by "
                         "side: one device, one mix); writes sustained_load{,_fixed}.json and sustained_ab.png")
    ap.add_argument("--ab-candidate", action="store_true",
                    help="run the mix twice in one process, the settings named (the defaults) then the candidate "
                         "configuration (CANDIDATE, changed by --candidate-*); writes sustained_load.json, "
                         "sustained_load_candidate.json and sustained_ab.png")
    for field in ("concurrency", "pool_size", "judges"):
        ap.add_argument(f"--candidate-{field.replace('_', '-')}", type=int, default=CANDIDATE[field])
    ap.add_argument("--candidate-judge-routing", choices=JUDGE_ROUTINGS, default=CANDIDATE["judge_routing"])
    ap.add_argument("--candidate-no-compile-cache", action="store_true", help="the candidate without the cache")
    ap.add_argument("--candidate-region-batch", type=float, nargs=2, metavar=("K", "T"),
                    default=CANDIDATE["region_batch"], help="K 0: regions not batched")
    ap.add_argument("--warm-references", action="store_true",
                    help="prepare every problem and time its reference before the clock starts (steady state "
                         "of an RL run, which times a problem's reference once for the whole run)")
    ap.add_argument("--duration-s", type=float, default=180.0)
    add_workload_args(ap)
    ap.add_argument("--out", default="out/sustained_load")
    ap.add_argument("--replot", action="store_true")
    return ap


def arms(args: argparse.Namespace) -> list[tuple[str, Arm]]:
    """The runs to make, by the name of their JSON: one, or two side by side (``--ab``, ``--ab-candidate``)."""
    base = Arm.of(args)
    if args.ab:
        return [("sustained_load", dataclasses.replace(base, timing_rule="adaptive")),
                ("sustained_load_fixed", dataclasses.replace(base, timing_rule="fixed"))]
    if args.ab_candidate:
        candidate = Arm(args.candidate_concurrency, args.candidate_pool_size, args.candidate_judges,
                        args.candidate_judge_routing, not args.candidate_no_compile_cache, base.timing_rule,
                        batch_of(args.candidate_region_batch))
        return [("sustained_load", base), ("sustained_load_candidate", candidate)]
    return [("sustained_load", base)]


def main() -> int:
    args = parser().parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.replot:
        plot(json.loads((out / "sustained_load.json").read_text()), out / "sustained_load.png")
        return 0
    if args.quick:
        args.trials, args.warmup, args.timed = 2, 1, 3
    runs: dict[str, dict] = {}
    for name, arm in arms(args):
        print(f"=== {name} ({arm}) ===", flush=True)
        runs[name] = summary = run(args, arm)
        (out / f"{name}.json").write_text(json.dumps(summary, indent=1))
        plot(summary, out / f"{name}.png")
        report(summary, name)
    if args.ab:
        report_ab(runs["sustained_load"], runs["sustained_load_fixed"], out)
    if args.ab_candidate:
        agree = report_candidate_ab(runs["sustained_load"], runs["sustained_load_candidate"], out)
        if not agree:
            return 1
    return 0 if all(r["evaluations"] for r in runs.values()) else 1


def report_ab(new: dict, old: dict, out: Path) -> None:
    """The adaptive rule against the fixed one, run side by side: rates, exclusive seconds per
    evaluation, and each problem's median gold speedup under both (the verdicts should agree)."""
    plot_ab({"adaptive": new, "fixed": old}, out / "sustained_ab.png", "adaptive vs fixed timing rule")
    print(f"SUMMARY sustained_ab evaluations/s adaptive {new['evals_per_s']:.3f} / fixed "
          f"{old['evals_per_s']:.3f} = x{new['evals_per_s'] / old['evals_per_s']:.2f}")
    print(f"SUMMARY sustained_ab exclusive s/evaluation adaptive {new['exclusive_s_per_eval'] or 0:.4f} / fixed "
          f"{old['exclusive_s_per_eval'] or 0:.4f}")
    both = sorted(set(new["speedup_median"]) & set(old["speedup_median"]))
    print("SUMMARY sustained_ab median gold speedup adaptive/fixed:",
          {p: round(new["speedup_median"][p] / old["speedup_median"][p], 3) for p in both})


def outcomes(summary: dict) -> dict[tuple[str, str], set[tuple[str, bool]]]:
    """Each solution's (problem, label) verdicts in a run: the set of (status, valid) it earned; an
    infrastructure error (the gym's failure, counted apart) is no verdict."""
    got: dict[tuple[str, str], set[tuple[str, bool]]] = defaultdict(set)
    for r in summary["rows"]:
        if r["status"] != "infrastructure_error":
            got[(r["problem"], r["label"])].add((r["status"], bool(r["valid"])))
    return got


def verdict_disagreements(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """The solutions evaluated in both runs whose verdicts differ: (those with no verdict in common
    between the runs, those whose verdicts merely vary, within a run or between them). Each solution is
    one source: every evaluation of it should earn the same status and validity."""
    va, vb = outcomes(a), outcomes(b)
    disjoint, varying = [], []
    for key in sorted(set(va) & set(vb)):
        if va[key] == vb[key] and len(va[key]) == 1:
            continue
        line = f"{key[0]}/{key[1]}: {sorted(va[key])} vs {sorted(vb[key])}"
        (varying if va[key] & vb[key] else disjoint).append(line)
    return disjoint, varying


def report_candidate_ab(base: dict, cand: dict, out: Path) -> bool:
    """The defaults against the candidate configuration, side by side: rates, GPU busy, exclusive seconds,
    the stage sums per evaluation, speedup CVs, median gold speedups, and whether the verdicts agree."""
    plot_ab({"defaults": base, "candidate": cand}, out / "sustained_ab.png", "defaults vs candidate configuration")
    keys = list(base["stage_seconds"])[:10] + ["judge_compare"]  # the defaults' largest, in both runs
    per_eval = {name: {k: round((s["stage_seconds"].get(k) or s["overlapping_stage_seconds"].get(k) or 0.0)
                                / max(1, s["evaluations"]), 3) for k in keys}
                for name, s in (("defaults", base), ("candidate", cand))}
    print(f"SUMMARY sustained_cc candidate {cand['setting']}")
    print(f"SUMMARY sustained_cc evaluations/s defaults {base['evals_per_s']:.3f} / candidate "
          f"{cand['evals_per_s']:.3f} = x{cand['evals_per_s'] / base['evals_per_s']:.2f}")
    for k in ("gpu_busy_fraction", "exclusive_s_per_eval", "speedup_cv_max", "latency_p50_s", "failing_fraction"):
        print(f"SUMMARY sustained_cc {k} defaults {base[k]} / candidate {cand[k]}")
    print("SUMMARY sustained_cc stage s/evaluation:", per_eval)
    print("SUMMARY sustained_cc compile cache:", cand["device"].get("compile_cache"))
    both = sorted(set(base["speedup_median"]) & set(cand["speedup_median"]))
    print("SUMMARY sustained_cc median gold speedup candidate/defaults:",
          {p: round(cand["speedup_median"][p] / base["speedup_median"][p], 3) for p in both})
    differ, varying = verdict_disagreements(base, cand)
    print(f"SUMMARY sustained_cc verdicts agree: {not differ} ({len(set(outcomes(base)) & set(outcomes(cand)))} "
          f"solutions in both runs, {len(varying)} of them with verdicts that vary)")
    for line in differ:
        print(f"SUMMARY sustained_cc verdicts differ: {line}")
    for line in varying:
        print(f"SUMMARY sustained_cc verdicts vary: {line}")
    return not differ


if __name__ == "__main__":
    sys.exit(main())
