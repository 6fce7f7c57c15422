"""`drkernel gym eval` (one solution), `drkernel gym replay` (results evaluated again) and `drkernel demo`
(the built-in suite's solutions).

Exit codes follow `drkernel.cli`: 0 valid, 1 not valid, 2 bad usage or input, 3 infrastructure.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, TypeVar

import typer
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from drkernel.cli import service as service_cli
from drkernel.cli.checks import positive, refuse, writable_dir
from drkernel.cli.devices import check_devices
from drkernel.cli.options import build, choices, default, group, set_option
from drkernel.errors import ConfigError, DrKernelError, InfrastructureError, JudgeError
from drkernel.gym import EvalConfig, EvalRequest, EvalResult, InProcessEvaluator, Status
from drkernel.gym.config import TOLERANCE_PROFILES
from drkernel.gym.orchestrator.evaluator import STAGE_LOGGER
from drkernel.gym.result import Hack, Verdict
from drkernel.problems import Problem, builtin_solution, load_builtin, resolve_problem

app = group("KernelGym: evaluate Triton solutions against PyTorch references.")
console = Console()
log = logging.getLogger(__name__)
T = TypeVar("T")
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
    table.add_column("coverage", no_wrap=True, justify="right")
    table.add_column("own kernels", overflow="fold")
    table.add_column("hacks", overflow="fold")
    for problem, label, r in rows:
        table.add_row(problem.removeprefix("builtin/"), label, _verdict(r), "yes" if r.valid else "no",
                      f"{r.speedup:.2f}x" if r.speedup is not None else "-", _pct(coverage(r)),
                      kernel_names(r), hack_names(r)[0])


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"
    return table


def markdown_table(rows: Sequence[tuple[str, str, EvalResult]], error_chars: int = 160) -> str:
    """The demo's table in markdown; the error column holds the error's last line, cut with an ellipsis.
    Coverage is time coverage where timed (GPU), else op coverage."""
    lines = ["| problem | solution | status | valid | speedup | solution ms | coverage | own kernels | hacks "
             "| strict-only flags | error |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for problem, label, r in rows:
        err = (r.error or "").strip().splitlines()
        last = clip((err[-1] if err else "").replace("|", "/"), error_chars)
        counted, strict = hack_names(r)
        lines.append(f"| {problem} | {label} | {r.status.value} | {'yes' if r.valid else 'no'} | "
                     f"{f'{r.speedup:.2f}x' if r.speedup is not None else '-'} | "
                     f"{f'{r.sol_timing.median_ms:.4g}' if r.sol_timing else '-'} | {_pct(coverage(r))} | "
                     f"{kernel_names(r)} | "
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


PROFILE = choices("Profile", sorted(TOLERANCE_PROFILES))
DEVICE_HELP = f"auto, cuda, cuda:N or cpu (default {default(EvalConfig, 'device')})"


@app.command("eval")
def eval_cmd(
    problem_arg: Optional[str] = typer.Argument(
        None, metavar="PROBLEM", help="problem key, name or id within --problems, or a reference .py"),
    solution_arg: Optional[Path] = typer.Argument(None, metavar="SOLUTION",
                                                  help="solution source file defining ModelNew"),
    problem: Optional[str] = typer.Option(None, "--problem", help="PROBLEM, given as an option"),
    solution: Optional[Path] = typer.Option(None, "--solution", help="SOLUTION, given as an option"),
    problems: str = typer.Option("builtin", "--problems", "-p",
                                 help="where PROBLEM is looked up: builtin[:N], rows.jsonl, a folder"),
    device: Optional[str] = typer.Option(None, "--device", help=DEVICE_HELP),
    profile: Optional[PROFILE] = typer.Option(
        None, "--profile", help=f"tolerance profile (default {default(EvalConfig, 'tolerance')})"),
    trials: Optional[int] = typer.Option(
        None, "--trials", min=1, help=f"correctness trials (default {default(EvalConfig, 'trials')})"),
    timeout: Optional[float] = typer.Option(None, "--timeout",
                                            help="wall-clock limit of the candidate in s "
                                                 f"(default {default(EvalConfig, 'timeout_s'):g})"),
    set_: Optional[List[str]] = set_option("evaluation config (EvalConfig)", "verdict_mode=strict"),
    as_json: bool = typer.Option(False, "--json", help="print the EvalResult as JSON"),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="run solutions WITHOUT the OS sandbox (trusted code only)"),
) -> None:
    """Evaluate one solution against one problem: `drkernel gym eval PROBLEM SOLUTION`."""
    positive(timeout, "--timeout")
    config = _eval_config({"device": device, "tolerance": profile, "trials": trials, "timeout_s": timeout},
                          set_)
    check_devices([("--device", config.device)])
    try:
        prob = resolve_problem(_one_of(problem_arg, problem, "PROBLEM"), problems)
        source = _one_of(solution_arg, solution, "SOLUTION").read_text()
    except (DrKernelError, OSError) as e:
        refuse(str(e))
    result = _evaluate_one(EvalRequest(problem=prob, solution=source, config=config), unsafe_no_sandbox)
    if as_json:
        typer.echo(result.to_json())
    else:
        _print_one(result)
    raise typer.Exit(0 if result.valid else 1)


def _one_of(positional: T | None, option: T | None, name: str) -> T:
    """The argument given once, as a positional or as its option."""
    if (positional is None) == (option is None):
        refuse(f"give {name} once, as an argument or as --{name.lower()}")
    return positional if positional is not None else option


def _eval_config(given: dict, sets: Optional[List[str]]) -> EvalConfig:
    try:
        return build(EvalConfig, "evaluation config", given=given, sets=sets, make=EvalConfig.from_dict)
    except ConfigError as e:
        refuse(str(e))


def _evaluate_one(request: EvalRequest, unsafe_no_sandbox: bool) -> EvalResult:
    """One evaluation with its stages shown; exit 2 when the reference cannot run, 3 on our failure."""
    try:
        with _stages_shown():
            log.info("starting the judge process on %s", request.config.device)
            with InProcessEvaluator(device=request.config.device, concurrency=1, pool_size=0,  # one-shot
                                    unsafe_no_sandbox=_unsafe(unsafe_no_sandbox)) as ev:
                return ev.evaluate(request)
    except JudgeError as e:
        console.print(f"[red]error: the reference problem cannot run:[/] {str(e).splitlines()[0]}")
        raise typer.Exit(2)
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/] {e}")
        raise typer.Exit(3)


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
    out: Path = typer.Option(Path("demo_results"), "--out", "-o",
                             help="folder for results.md and results.json"),
    device: Optional[str] = typer.Option(None, "--device", help=DEVICE_HELP),
    level: int = typer.Option(0, "--level", min=0, max=3, help="only this level of the suite (0: all)"),
    limit: int = typer.Option(0, "--limit", min=0, help="at most this many problems (0: all)"),
    concurrency: int = typer.Option(2, "--concurrency", min=1, help="candidates in flight"),
    set_: Optional[List[str]] = set_option("evaluation config (EvalConfig)", "trials=3"),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="run solutions WITHOUT the OS sandbox (trusted code only)"),
) -> None:
    """Evaluate every solution of the built-in suite: the gold ones, and the broken, lazy and slow ones
    that must be caught, flagged or timed; print the table and a summary line (gold correct, broken
    caught, lazy flagged, coverage), and save results.md and results.json into --out."""
    writable_dir(out)
    config = _eval_config({"device": device}, set_)
    check_devices([("--device", config.device)])
    try:
        problems = load_builtin([level] if level else None)
    except DrKernelError as e:
        refuse(str(e))
    problems = problems[:limit] if limit else problems
    jobs = demo_requests(problems, config)
    if not jobs:
        refuse("the built-in suite has no problems with solutions")
    t0 = time.monotonic()
    rows, device_name = _run_demo(jobs, concurrency, unsafe_no_sandbox)
    title = f"{len(rows)} solutions of {len(problems)} built-in problems on {device_name}"
    if console.is_terminal:
        console.print(result_table(rows, title))
    else:  # a boxed table folds into unreadable fragments at a log's 80 columns; markdown keeps one line a row
        typer.echo(f"{title}\n\n{markdown_table(rows)}")
    summary = demo_summary(rows)
    (out_md, out_json) = _write_demo(out, rows, f"{title}, {time.monotonic() - t0:.0f} s", summary)
    typer.echo(summary)
    console.print(f"wrote {out_md} and {out_json}")


def _run_demo(jobs: list[tuple[str, str, EvalRequest]], concurrency: int,
              unsafe_no_sandbox: bool) -> tuple[list[tuple[str, str, EvalResult]], str]:
    """Every job through one evaluator, progress shown (a bar, or a line per solution in a log)."""
    rows: list[tuple[str, str, EvalResult] | None] = [None] * len(jobs)
    device = jobs[0][2].config.device
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
    return [r for r in rows if r is not None], device_name


def _lazy_flagged(r: EvalResult) -> bool:
    return not r.valid or any("lazy" in w for w in r.warnings)


def demo_summary(rows: Sequence[tuple[str, str, EvalResult]]) -> str:
    """One line: gold correct, broken caught (not valid), lazy flagged (a lazy warning or not valid),
    slow valid, and the gold solutions' mean coverage (time coverage where timed, else op coverage)."""
    by_kind: dict[str, list[EvalResult]] = {}
    for _, label, r in rows:
        by_kind.setdefault(label.split("_")[0], []).append(r)
    gold, broken = by_kind.get("gold", []), by_kind.get("broken", [])
    lazy, slow = by_kind.get("lazy", []), by_kind.get("slow", [])
    parts = [f"{sum(r.valid for r in gold)}/{len(gold)} gold correct",
             f"{sum(not r.valid for r in broken)}/{len(broken)} broken caught",
             f"{sum(_lazy_flagged(r) for r in lazy)}/{len(lazy)} lazy flagged"]
    if slow:
        parts.append(f"{sum(r.valid for r in slow)}/{len(slow)} slow valid")
    covered = [c for c in (coverage(r) for r in gold) if c is not None]
    if covered:
        parts.append(f"gold coverage {sum(covered) / len(covered):.0%} (mean)")
    return "summary: " + ", ".join(parts)


def coverage(r: EvalResult) -> float | None:
    """The coverage a reader should see: time coverage when measured (GPU), else op coverage."""
    return r.time_coverage if r.time_coverage is not None else r.op_coverage


def _write_demo(out: Path, rows: Sequence[tuple[str, str, EvalResult]], title: str,
                summary: str) -> tuple[Path, Path]:
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text(f"# drkernel demo\n\n{title}.\n\n{summary}\n\n"
                                        + markdown_table(rows))
        (out / "results.json").write_text(json.dumps(
            [{"problem": k, "solution": label, "result": r.to_dict()} for k, label, r in rows], indent=1))
    except OSError as e:  # checked before the run; the folder changed meanwhile
        refuse(f"--out {out}: {e}")
    return out / "results.md", out / "results.json"


@app.command("replay")
def replay_cmd(
    path: Path = typer.Argument(..., metavar="RESULTS",
                                help="a result file ({request, result}), a trajectory file or a bench run folder"),
    device: Optional[str] = typer.Option(None, "--device", help="replay on this device (default: each result's)"),
    limit: int = typer.Option(0, "--limit", min=0, help="only the first N results (0: all)"),
    concurrency: int = typer.Option(2, "--concurrency", min=1, help="candidates in flight"),
    as_json: bool = typer.Option(False, "--json", help="print the agreements as JSON"),
    fresh_seeds: bool = typer.Option(False, "--fresh-seeds",
                                     help="draw new inputs instead of the ones each result's revealed seeds name"),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="run solutions WITHOUT the OS sandbox (trusted code only)"),
) -> None:
    """Evaluate again what results name, on the same inputs (their revealed seeds), and report
    agreement: verdict class, speedup within its interval, the provenance fields that differ. Exit 0
    when every result agrees, 1 otherwise."""
    import asyncio
    from dataclasses import replace as _replace

    from drkernel.gym import replay as rp

    try:
        records = rp.load(path)
    except (OSError, ValueError, KeyError, DrKernelError) as e:
        refuse(f"{path}: {e}")
    records = records[:limit] if limit else records
    if device is not None:
        records = [_replace(r, request=_replace(r.request, config=r.request.config.replace(device=device)))
                   for r in records]
    if not records:
        refuse(f"{path}: no evaluated results to replay")
    try:
        with InProcessEvaluator(device=records[0].request.config.device, concurrency=concurrency,
                                pool_size=concurrency, unsafe_no_sandbox=_unsafe(unsafe_no_sandbox)) as ev:
            agreements = asyncio.run(rp.replay(records, ev, same_inputs=not fresh_seeds))
    except InfrastructureError as e:
        console.print(f"[red]infrastructure failure:[/] {e}")
        raise typer.Exit(3)
    if as_json:
        typer.echo(json.dumps([a.to_dict() for a in agreements], indent=1))
    else:
        console.print(_agreement_table(agreements))
    typer.echo(f"replay: {sum(a.agrees for a in agreements)}/{len(agreements)} agree, "
               f"{sum(a.same_class for a in agreements)} same verdict class, "
               f"{sum(a.speedup_agrees is True for a in agreements)}/"
               f"{sum(a.speedup_agrees is not None for a in agreements)} speedups within their intervals")
    raise typer.Exit(0 if all(a.agrees for a in agreements) else 1)


def _agreement_table(agreements: Sequence) -> Table:
    table = Table(title="replay")
    for column in ("result", "verdict", "speedup", "provenance that differs"):
        table.add_column(column)
    for a in agreements:
        verdict = a.original if a.same_class else f"[red]{a.original} -> {a.replayed}[/]"
        speed = " -> ".join("-" if s is None else f"{s:.3f}" for s in a.speedups)
        if a.speedup_agrees is False:
            speed = f"[red]{speed}[/]"
        table.add_row(a.key, verdict, speed, "; ".join(a.provenance) or "")
    return table


@app.command("scorecard")
def scorecard_cmd(
    corpus: Path = typer.Argument(Path("tests/adversarial"), help="a folder with problems/, hacked/ and honest/"),
    device: str = typer.Option("cpu", "--device", help="cpu (Triton's interpreter) or cuda"),
    match: str = typer.Option("", "--match", help="only entries whose id (e.g. honest/pub_) contains this"),
    concurrency: int = typer.Option(2, "--concurrency", help="candidates evaluated at once"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="also write the scorecard as JSON here"),
) -> None:
    """Recall per hack family on the attack corpus and the false-positive rate on the honest one."""
    from drkernel.gym import scorecard

    def progress(outcome: "scorecard.Outcome", done: int, total: int) -> None:
        mark = "ok" if outcome.passed else "NOT OK"
        typer.echo(f"[{done}/{total}] {outcome.id}: {mark} ({outcome.status}, hacks {list(outcome.hacks)})", err=True)

    card = scorecard.run(corpus, device=device, concurrency=concurrency, match=match, progress=progress)
    typer.echo(card.markdown())
    if json_out is not None:
        json_out.write_text(card.to_json())
    raise typer.Exit(0 if all(o.passed for o in card.outcomes) else 1)


# The service's commands (serve, submit, status) live in cli/service.py.
service_cli.register(app)
