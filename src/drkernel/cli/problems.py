"""`drkernel problems list|show`."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.syntax import Syntax
from rich.table import Table

from drkernel.errors import DrKernelError
from drkernel.problems import load_problems, resolve_problem

app = typer.Typer(no_args_is_help=True, help="List and show reference problems.")
console = Console()


@app.command("list")
def list_problems(
    source: str = typer.Option("builtin", "--problems", "-p", help="builtin[:N], rows.jsonl[:N], KernelBench dir[:N]"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per problem"),
) -> None:
    """List the problems of a source."""
    try:
        problems = load_problems(source)
    except DrKernelError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if as_json:
        for p in problems:
            typer.echo(json.dumps({"key": p.key, "name": p.name, "level": p.level, "problem_id": p.problem_id,
                                   "dtype": p.dtype, "solutions": p.metadata.get("solutions", {})}))
        return
    table = Table(title=f"{len(problems)} problems from {source}")
    for col in ("key", "level", "dtype", "solutions"):
        table.add_column(col)
    for p in problems:
        sols = p.metadata.get("solutions", {})
        table.add_row(p.key, str(p.level), p.dtype, ", ".join(sorted(sols)) if sols else "")
    console.print(table)


@app.command("show")
def show_problem(
    ident: str = typer.Argument(..., help="problem key, L{level}/{name}, name, id, or a .py path"),
    source: str = typer.Option("builtin", "--problems", "-p"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one problem's reference source and metadata."""
    try:
        p = resolve_problem(ident, source)
    except DrKernelError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    if as_json:
        typer.echo(json.dumps(p.to_dict()))
        return
    console.print(f"[bold]{p.key}[/]  level {p.level}  dtype {p.dtype}  cpu overrides {dict(p.cpu_overrides)}")
    console.print(Syntax(p.code, "python"))
