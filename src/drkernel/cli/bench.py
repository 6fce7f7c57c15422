"""`drkernel bench run|report`: benchmark a policy on a problem set; report Fast@p with plots."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from drkernel.cli.checks import refuse, writable_dir
from drkernel.cli.devices import check_devices
from drkernel.cli.options import build, group, set_option
from drkernel.errors import DrKernelError, InfrastructureError

app = group("Benchmark a kernel-writing policy: Fast@p, trajectories, reports.")
console = Console()


def _summary_table(metrics: dict[str, Any]) -> Table:
    from drkernel.bench.metrics import PS, p_key

    table = Table(
        title=f"{metrics['samples']} samples, {metrics['problems']} problems"
        + ("" if metrics["timed"] else " (no timing: Fast@p>0 not measured)")
    )
    table.add_column("turn")
    for p in PS:
        table.add_column(f"Fast@{p:g}", justify="right")
    table.add_column("hacked", justify="right")
    for kind in ("per_turn", "best_by_turn"):
        for r in metrics[kind]:
            label = str(r["turn"]) if kind == "per_turn" else f"best@{r['turn']}"
            cells = ["n/m" if r[p_key(p)] is None else f"{100 * r[p_key(p)]:.1f}" for p in PS]
            table.add_row(label, *cells, f"{100 * r['hacked']:.1f}" if "hacked" in r else "")
    return table


@app.command("run")
def run(
    out: Path = typer.Option(..., "--out", "-o", help="run folder (a rerun resumes it)"),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="YAML bench config (configs/bench/*.yaml)"),
    problems: Optional[str] = typer.Option(
        None, "--problems", "-p", help="builtin[:N] | KernelBench dir[:N] | rows.jsonl/.parquet[:N]"),
    policy: Optional[str] = typer.Option(
        None, "--policy", help="scripted:builtin | openai:URL,model=M | hf:PATH | tiny | vllm:MODEL"),
    samples: Optional[int] = typer.Option(None, "--samples", "-n", min=1, help="episodes per problem"),
    turns: Optional[int] = typer.Option(None, "--turns", "-t", min=1, help="turns per episode"),
    tts: Optional[str] = typer.Option(
        None, "--tts", help="test-time scaling, e.g. first=5,iterations=10,window=4,select=reward"),
    temperature: Optional[float] = typer.Option(None, "--temperature", min=0.0, help="sampling temperature"),
    top_p: Optional[float] = typer.Option(None, "--top-p", min=0.0, max=1.0, help="nucleus sampling mass"),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="completion length limit"),
    evaluator: Optional[str] = typer.Option(None, "--evaluator", "-e", help="local | http://host:port"),
    device: Optional[str] = typer.Option(None, "--device", help="local gym: auto | cpu | cuda | cuda:N"),
    timing: Optional[bool] = typer.Option(None, "--timing/--no-timing", help="time solutions (GPU only)"),
    eval_concurrency: Optional[int] = typer.Option(
        None, "--eval-concurrency", min=1, help="local gym: solutions evaluated at once"),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the first N problems"),
    language: Optional[str] = typer.Option(
        None, "--language", help="triton | cuda: what the policy writes (scripted:builtin_cuda replays CUDA golds)"),
    set_: Optional[List[str]] = set_option("bench config (BenchConfig)", "history=last or eval.trials=3"),
    report: bool = typer.Option(True, "--report/--no-report", help="write report.md and plots at the end"),
) -> None:
    """Run (or resume) a benchmark; writes trajectories, metrics.json and a report into --out.
    Options left out take the --config file's values, else BenchConfig's defaults."""
    given = {"problems": problems, "policy": policy, "samples": samples, "turns": turns, "tts": tts,
             "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens, "evaluator": evaluator,
             "eval.device": device, "eval.timing": timing, "eval_concurrency": eval_concurrency,
             "limit": limit, "language": language}
    writable_dir(out)
    cfg, probs, pol, ev = _prepare(out, config, given, set_)
    metrics = _run_with_progress(cfg, probs, pol, ev, out)
    console.print(_summary_table(metrics))
    if report:
        from drkernel.bench.report import write_report

        console.print(f"report: {write_report(out)}")
    _fail_on_policy_errors(metrics["run"])


def _prepare(out: Path, config: Optional[Path], given: dict[str, Any], sets: Optional[List[str]]):
    """The config, problems, policy and evaluator, every check done before any episode starts."""
    from drkernel.agent.policies.spec import make_policy
    from drkernel.bench.run import BenchConfig, check_same_run
    from drkernel.config import read_yaml_mapping
    from drkernel.problems import load_problems
    from drkernel.tasks import make_evaluator

    try:
        base = read_yaml_mapping(config, "bench config") if config else {}
        cfg = build(BenchConfig, "bench config", base, given, sets, make=BenchConfig.from_dict)
    except DrKernelError as e:
        refuse(str(e))
    if cfg.evaluator == "local":
        check_devices([("eval.device", cfg.eval.device)])
    try:
        check_same_run(out, cfg)
        probs = load_problems(cfg.problems)
        pol = make_policy(cfg.policy, probs)
        ev = make_evaluator(cfg.evaluator, cfg.eval.device, cfg.eval_concurrency,
                            unsafe_no_sandbox=cfg.unsafe_no_sandbox)
    except DrKernelError as e:
        refuse(str(e))
    return cfg, probs, pol, ev


def _run_with_progress(cfg, probs, pol, ev, out: Path) -> dict[str, Any]:
    """The episodes, with a bar on a terminal and one line per episode in a log; exit 3 or 2 on failure."""
    from drkernel.bench.run import run_bench

    progress = Progress(
        TextColumn("[bold]episodes"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
        TimeElapsedColumn(), TimeRemainingColumn(), console=console,
        disable=not console.is_terminal,  # a log gets one line per episode instead (on_progress)
    )
    task = progress.add_task("", total=None)
    valid = 0

    def on_progress(ep, done, total):
        nonlocal valid
        if ep is not None and ep.best_turn() is not None:
            valid += 1
        desc = ("resumed" if done else "") if ep is None else (
            f"last: {ep.id} -> {ep.turns[-1].outcome if ep.turns else '-'}  valid episodes: {valid}")
        progress.update(task, completed=done, total=total, description=desc)
        if ep is not None and not console.is_terminal:
            typer.echo(f"[{done}/{total}] {ep.id} -> {' -> '.join(t.outcome for t in ep.turns) or '-'}")

    async def go():
        try:
            return await run_bench(cfg, probs, pol, ev, out, on_progress)
        finally:
            await pol.aclose()
            ev.close()

    try:
        with progress:
            return asyncio.run(go())
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/] {e} (rerun the same command to resume)")
        raise typer.Exit(3)
    except DrKernelError as e:
        refuse(str(e))


def _fail_on_policy_errors(run: dict[str, Any]) -> None:
    """Exit 3 when episodes failed for the policy's sake (an unreachable endpoint, a dead server).

    Such episodes are not written, so an exit 0 would present a partial (or empty) benchmark as done.
    """
    if not run["policy_errors"]:
        return
    lines = (run.get("first_policy_error") or "").splitlines()
    reason = next((ln for ln in lines if ln.startswith("The request failed")), " ".join(lines))
    console.print(
        f"[red]infrastructure failure:[/] {run['policy_errors']} of {run['episodes_run_now']} episode(s) "
        f"ended in policy errors and were not written ({reason or 'no message'}); "
        "fix the policy or its endpoint and rerun the same command to retry them"
    )
    raise typer.Exit(3)


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="a `bench run` folder"),
    out: Path | None = typer.Option(None, "--out", "-o", help="where to write (default: the run folder)"),
    as_json: bool = typer.Option(False, "--json", help="print metrics.json instead"),
) -> None:
    """Write report.md with plots (Fast@p by turn, speedups, outcomes) for a run folder."""
    from drkernel.bench.report import write_report

    if not (run_dir / "metrics.json").exists():
        console.print(f"[red]error:[/] {run_dir} has no metrics.json (not a bench run folder?)")
        raise typer.Exit(2)
    if as_json:
        typer.echo((run_dir / "metrics.json").read_text())
        return
    console.print(_summary_table(json.loads((run_dir / "metrics.json").read_text())))
    console.print(f"report: {write_report(run_dir, out)}")
