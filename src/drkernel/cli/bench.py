"""`drkernel bench run|report`: benchmark a policy on a problem set; report Fast@p with plots."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

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

from drkernel.cli.devices import require_local_device
from drkernel.errors import DrKernelError, InfrastructureError

app = typer.Typer(
    no_args_is_help=True, help="Benchmark a kernel-writing policy: Fast@p, trajectories, reports."
)
console = Console()


def _overrides(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


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
    config: Path | None = typer.Option(
        None, "--config", "-c", help="YAML bench config (configs/bench/*.yaml)"
    ),
    problems: str | None = typer.Option(
        None, "--problems", "-p", help="builtin[:N] | KernelBench dir[:N] | rows.jsonl[:N]"
    ),
    policy: str | None = typer.Option(
        None, "--policy", help="scripted:builtin | openai:URL,model=M | hf:PATH | tiny | vllm:MODEL"
    ),
    samples: int | None = typer.Option(None, "--samples", "-n", help="episodes per problem"),
    turns: int | None = typer.Option(None, "--turns", "-t"),
    tts: str | None = typer.Option(
        None, "--tts", help="test-time scaling, e.g. first=5,iterations=10,window=4,select=reward"
    ),
    history: str | None = typer.Option(None, "--history", help="all | last"),
    history_k: int | None = typer.Option(None, "--history-k"),
    early_stop: str | None = typer.Option(None, "--early-stop", help="never | valid | speedup"),
    temperature: float | None = typer.Option(None, "--temperature"),
    top_p: float | None = typer.Option(None, "--top-p"),
    max_tokens: int | None = typer.Option(None, "--max-tokens"),
    evaluator: str | None = typer.Option(None, "--evaluator", "-e", help="local | http://host:port"),
    device: str | None = typer.Option(None, "--device", help="auto | cpu | cuda | cuda:N"),
    timing: bool | None = typer.Option(None, "--timing/--no-timing"),
    concurrency: int | None = typer.Option(None, "--concurrency", help="episodes in flight"),
    eval_concurrency: int | None = typer.Option(
        None, "--eval-concurrency", help="local gym: solutions at once"
    ),
    limit: int | None = typer.Option(None, "--limit", help="only the first N problems"),
    fmt: str | None = typer.Option(None, "--format", help="jsonl | parquet"),
    save_tokens: bool | None = typer.Option(None, "--save-tokens/--no-save-tokens"),
    templates: str | None = typer.Option(None, "--templates", help="folder of prompt templates"),
    report: bool = typer.Option(True, "--report/--no-report", help="write report.md and plots at the end"),
) -> None:
    """Run (or resume) a benchmark; writes trajectories, metrics.json and a report into --out."""
    from drkernel.agent.policies.spec import make_policy
    from drkernel.bench.run import BenchConfig, check_same_run, make_evaluator, run_bench
    from drkernel.problems import load_problems

    over = _overrides(
        problems=problems,
        policy=policy,
        samples=samples,
        turns=turns,
        tts=tts,
        history=history,
        history_k=history_k,
        early_stop=early_stop,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        evaluator=evaluator,
        eval=_overrides(device=device, timing=timing) or None,
        concurrency=concurrency,
        eval_concurrency=eval_concurrency,
        limit=limit,
        format=fmt,
        save_tokens=save_tokens,
        templates=templates,
    )
    try:
        cfg = BenchConfig.from_yaml(config, **over) if config else BenchConfig.from_dict(over)
        if cfg.evaluator == "local":
            require_local_device(cfg.eval.device)
        check_same_run(out, cfg)
        probs = load_problems(cfg.problems)
        pol = make_policy(cfg.policy, probs)
        ev = make_evaluator(cfg.evaluator, cfg.eval.device, cfg.eval_concurrency, cfg.unsafe_no_sandbox)
    except DrKernelError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    progress = Progress(
        TextColumn("[bold]episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,  # a log gets one line per episode instead (on_progress)
    )
    task = progress.add_task("", total=None)
    valid = 0

    def on_progress(ep, done, total):
        nonlocal valid
        if ep is not None and ep.best_turn() is not None:
            valid += 1
        desc = (
            f"last: {ep.id} -> {ep.turns[-1].outcome if ep.turns else '-'}  valid episodes: {valid}"
            if ep
            else "resumed"
            if done
            else ""
        )
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
            metrics = asyncio.run(go())
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/] {e} (rerun the same command to resume)")
        raise typer.Exit(3)
    except DrKernelError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    console.print(_summary_table(metrics))
    if report:
        from drkernel.bench.report import write_report

        console.print(f"report: {write_report(out)}")
    _fail_on_policy_errors(metrics["run"])


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
    run_dir: Path = typer.Argument(..., help="a `bench run` folder"),
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
