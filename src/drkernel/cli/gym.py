"""`drkernel gym eval` (one solution) and `drkernel demo` (the built-in suite's solutions).

Exit codes follow `drkernel.cli`: 0 valid, 1 not valid, 2 bad usage or input, 3 infrastructure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Iterator, Sequence

import typer
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from drkernel.cli import service as service_cli
from drkernel.cli.devices import require_local_device
from drkernel.errors import ConfigError, DrKernelError, InfrastructureError, JudgeError
from drkernel.gym import EvalConfig, EvalRequest, EvalResult, InProcessEvaluator, Status
from drkernel.gym.orchestrator.evaluator import STAGE_LOGGER
from drkernel.gym.result import Hack, Verdict
from drkernel.problems import Problem, builtin_solution, load_builtin, resolve_problem

app = typer.Typer(no_args_is_help=True, help="KernelGym: evaluate Triton solutions against PyTorch references.")
console = Console()
log = logging.getLogger(__name__)
STATUS_STYLE = {Status.CORRECT: "green", Status.INCORRECT: "red", Status.REJECTED: "magenta",
                Status.UNSUPPORTED_ON_CPU: "yellow", Status.TIMEOUT: "yellow"}


def _fmt_ms(stats) -> str:
    return f"{stats.median_ms:.4g} ms (cv {stats.cv:.1%})" if stats else "-"


def _verdict(r: EvalResult) -> str:
    style = STATUS_STYLE.get(r.status, "red")
    if r.hacked:  # a hack the verdict mode counts
        return f"[{style}]{r.status.value}[/] [magenta]hacked[/]"
    if any("lazy" in w for w in r.warnings):
        return f"[{style}]{r.status.value}[/] [yellow]lazy[/]"
    return f"[{style}]{r.status.value}[/]"


def _counted(r: EvalResult, h: Hack) -> bool:
    """Whether the result's verdict mode counts hack ``h`` (lenient modes leave strict-only ones out)."""
    return r.verdict_mode == Verdict.STRICT.value or not h.strict_only


def hack_names(r: EvalResult) -> tuple[str, str]:
    """(hacks the verdict counts, strict-only flags it does not), each ``-`` when none.

    A valid lazy solution carries a strict-only ``pytorch_passthrough``: shown under "hacks" it would
    read as a caught hack although the verdict accepted it.
    """
    counted = ", ".join(h.name for h in r.hacks if _counted(r, h)) or "-"
    strict = ", ".join(h.name for h in r.hacks if not _counted(r, h)) or "-"
    return counted, strict


def kernel_names(r: EvalResult, own: bool = True) -> str:
    """``name xN`` per launched kernel (the solution's own, or the others), ``-`` when none."""
    return ", ".join(f"{k.name} x{k.launches}" for k in r.kernels if k.own == own) or "-"


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result_table(rows: Sequence[tuple[str, str, EvalResult]], title: str) -> Table:
    """One row per (problem, solution label, result); status and speedup never wrap."""
    table = Table(title=title)
    table.add_column("problem", overflow="fold")
    table.add_column("solution", overflow="fold")
    table.add_column("status", no_wrap=True)
    table.add_column("valid", no_wrap=True)
    table.add_column("speedup", no_wrap=True, justify="right")
    table.add_column("own kernels", overflow="fold")
    table.add_column("hacks", overflow="fold")
    for problem, label, r in rows:
        table.add_row(problem.removeprefix("builtin/"), label, _verdict(r), "yes" if r.valid else "no",
                      f"{r.speedup:.2f}x" if r.speedup is not None else "-", kernel_names(r),
                      hack_names(r)[0])
    return table


def markdown_table(rows: Sequence[tuple[str, str, EvalResult]], error_chars: int = 160) -> str:
    """The demo's table in markdown; the error column holds the error's last line, cut with an ellipsis."""
    lines = ["| problem | solution | status | valid | speedup | solution ms | own kernels | hacks "
             "| strict-only flags | error |", "|---|---|---|---|---|---|---|---|---|---|"]
    for problem, label, r in rows:
        err = (r.error or "").strip().splitlines()
        last = clip((err[-1] if err else "").replace("|", "/"), error_chars)
        counted, strict = hack_names(r)
        lines.append(f"| {problem} | {label} | {r.status.value} | {'yes' if r.valid else 'no'} | "
                     f"{f'{r.speedup:.2f}x' if r.speedup is not None else '-'} | "
                     f"{f'{r.sol_timing.median_ms:.4g}' if r.sol_timing else '-'} | {kernel_names(r)} | "
                     f"{counted} | {strict} | {last} |")
    return "\n".join(lines) + "\n"


def _print_one(r: EvalResult) -> None:
    """A two-column table (field, value): narrow terminals keep every value on its lines."""
    table = Table(title=f"{r.problem_key} on {r.device_name}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    trials = ", ".join(f"{t.trial}:{'ok' if t.passed else 'FAIL'}({t.size}"
                       + (f", err {t.max_abs_err:.2g})" if t.max_abs_err is not None else ")") for t in r.trials)
    rows = [("status", _verdict(r)), ("valid", "yes" if r.valid else "no"),
            ("trials", trials or "-"), ("tolerance", f"{r.tolerance_profile} (atol {r.atol}, rtol {r.rtol})"),
            ("own kernels", kernel_names(r)), ("other kernels", kernel_names(r, own=False)),
            ("speedup", f"{r.speedup:.3f}x" if r.speedup is not None else "-"),
            ("solution time", _fmt_ms(r.sol_timing)),
            ("reference time", _fmt_ms(r.ref_timing) + (" (cached)" if r.reference_cached else "")),
            ("timing note", r.timing_note or "-"),
            ("stages", ", ".join(f"{k} {v:.2f}s" for k, v in r.stage_seconds.items())),
            ("elapsed", f"{r.elapsed_s or 0:.2f}s")]
    rows += [(f"hack {h.code}" + ("" if _counted(r, h) else " (strict only)"),
              f"[magenta]{h.name}[/]: {h.message} ({h.evidence})") for h in r.hacks]
    for field, value in rows:
        table.add_row(field, value)
    console.print(table)
    if r.error:
        console.print(Panel(r.error, title="error", border_style="red"))


@app.command("eval")
def eval_cmd(
    problem: str = typer.Option(..., "--problem", help="problem key/name/id within --problems, or a reference .py"),
    solution: Path = typer.Option(..., "--solution", help="solution source file defining ModelNew"),
    problems: str = typer.Option("builtin", "--problems", "-p", help="problem source: builtin[:N], rows.jsonl, dir"),
    device: str = typer.Option("auto", "--device", help="auto, cuda, cuda:N or cpu"),
    profile: str = typer.Option("kernelgym", "--profile", help="tolerance profile: kernelgym or kernelbench"),
    trials: int = typer.Option(5, "--trials", help="correctness trials"),
    timeout: float = typer.Option(300.0, "--timeout", help="wall-clock limit of the candidate (s)"),
    as_json: bool = typer.Option(False, "--json", help="print the EvalResult as JSON"),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="run solutions WITHOUT the OS sandbox (trusted code only)"),
) -> None:
    """Evaluate one solution against one problem."""
    try:
        require_local_device(device)
        prob = resolve_problem(problem, problems)
        source = solution.read_text()
        config = EvalConfig(device=device, tolerance=profile, trials=trials, timeout_s=timeout)
    except (DrKernelError, OSError) as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    try:
        with _stages_shown():
            log.info("starting the judge process on %s", device)
            with InProcessEvaluator(device=device, concurrency=1, pool_size=0,  # one-shot: no spare child
                                    unsafe_no_sandbox=_unsafe(unsafe_no_sandbox)) as ev:
                result = ev.evaluate(EvalRequest(problem=prob, solution=source, config=config))
    except JudgeError as e:
        console.print(f"[red]error: the reference problem cannot run:[/] {str(e).splitlines()[0]}")
        raise typer.Exit(2)
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/] {e}")
        raise typer.Exit(3)
    if as_json:
        typer.echo(result.to_json())
    else:
        _print_one(result)
    raise typer.Exit(0 if result.valid else 1)


@contextlib.contextmanager
def _stages_shown() -> Iterator[None]:
    """Print the evaluator's stage lines on stderr as they happen, with the seconds since the start.

    An evaluation can take minutes (the reference on CPU, a candidate up to its time limit); without
    them `gym eval` is silent until the end. stderr keeps ``--json`` output on stdout clean. The loggers
    are restored afterwards: a handler left behind on a stream that its caller closed (a test invoking
    the CLI) made every later stage line a logging error, whose traceback printing on several threads
    at once broke Python 3.11's AST state for a concurrent parse (`drkernel.pyast`).
    """
    start = time.monotonic()

    class _Elapsed(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            return f"[{time.monotonic() - start:6.1f}s] {record.getMessage()}"

    handler = logging.StreamHandler()  # stderr
    handler.setFormatter(_Elapsed())
    loggers = [logging.getLogger(name) for name in (__name__, STAGE_LOGGER)]
    saved = [(lg.level, lg.handlers, lg.propagate) for lg in loggers]
    for logger in loggers:
        logger.setLevel(logging.DEBUG)
        logger.handlers = [handler]
        logger.propagate = False
    try:
        yield
    finally:
        for logger, (level, handlers, propagate) in zip(loggers, saved):
            logger.setLevel(level)
            logger.handlers, logger.propagate = handlers, propagate


def _unsafe(flag: bool) -> bool:
    """The ``--unsafe-no-sandbox`` flag, announced loudly when given."""
    if flag:
        from drkernel.gym.orchestrator.sandbox import UNSAFE_WARNING

        console.print(f"[bold red]WARNING: {UNSAFE_WARNING}[/]")
    return flag


def demo_requests(problems: Sequence[Problem], config: EvalConfig) -> list[tuple[str, str, EvalRequest]]:
    """Every solution file of every built-in problem: gold, and the broken, lazy and slow ones."""
    out = []
    for p in problems:
        for filename in sorted(p.metadata.get("solutions", {})):
            out.append((p.key, filename.removesuffix(".py"),
                        EvalRequest(problem=p, solution=builtin_solution(p, filename), config=config,
                                    request_id=f"{p.key}/{filename}")))
    return out


def demo(
    out: Path = typer.Option(Path("demo_results"), "--out", help="folder for results.md and results.json"),
    device: str = typer.Option("auto", "--device", help="auto, cuda, cuda:N or cpu"),
    level: int = typer.Option(0, "--level", help="only this level of the suite (0: all)"),
    limit: int = typer.Option(0, "--limit", help="at most this many problems (0: all)"),
    concurrency: int = typer.Option(2, "--concurrency", help="candidates in flight"),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="run solutions WITHOUT the OS sandbox (trusted code only)"),
) -> None:
    """Evaluate the built-in suite's gold and broken solutions; print and save the table."""
    try:
        require_local_device(device)
        problems = load_builtin([level] if level else None)
        config = EvalConfig(device=device)
    except (DrKernelError, ConfigError) as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if limit:
        problems = problems[:limit]
    jobs = demo_requests(problems, config)
    if not jobs:
        console.print("[red]error:[/] the built-in suite has no problems with solutions")
        raise typer.Exit(2)
    rows: list[tuple[str, str, EvalResult] | None] = [None] * len(jobs)
    t0 = time.monotonic()
    try:
        with InProcessEvaluator(device=device, concurrency=concurrency, pool_size=concurrency,
                                unsafe_no_sandbox=_unsafe(unsafe_no_sandbox)) as ev, \
                Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                         console=console, disable=not console.is_terminal) as progress:
            task = progress.add_task("evaluating", total=len(jobs))
            with ThreadPoolExecutor(max_workers=concurrency) as pool:
                futures = {pool.submit(ev.evaluate, req): i for i, (_, _, req) in enumerate(jobs)}
                for fut in as_completed(futures):
                    i = futures[fut]
                    key, label, _ = jobs[i]
                    rows[i] = (key, label, fut.result())
                    progress.update(task, advance=1, description=f"{key} {label}: {rows[i][2].status.value}")
                    if not console.is_terminal:  # a log file gets one line per solution instead of a bar
                        typer.echo(f"[{sum(r is not None for r in rows)}/{len(jobs)}] {key} {label}: "
                                   f"{rows[i][2].status.value}")
            device_name = ev.device_info()["name"]
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/] {e}")
        raise typer.Exit(3)
    done = [r for r in rows if r is not None]
    title = f"{len(done)} solutions of {len(problems)} built-in problems on {device_name}"
    if console.is_terminal:
        console.print(result_table(done, title))
    else:  # a boxed table folds into unreadable fragments at a log's 80 columns; markdown keeps one line a row
        typer.echo(f"{title}\n\n{markdown_table(done)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(f"# drkernel demo\n\n{title}, {time.monotonic() - t0:.0f} s.\n\n"
                                    + markdown_table(done))
    (out / "results.json").write_text(json.dumps(
        [{"problem": k, "solution": label, "result": r.to_dict()} for k, label, r in done], indent=1))
    console.print(f"wrote {out / 'results.md'} and {out / 'results.json'}")


# The service's commands (serve, submit, status) live in cli/service.py.
service_cli.register(app)
