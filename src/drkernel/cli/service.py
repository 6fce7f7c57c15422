"""`drkernel gym serve|submit|status`: run and use the KernelGym service.

Registered on the `gym` group by `register(app)` (the group itself lives in cli/gym.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.table import Table

from drkernel.cli.checks import refuse
from drkernel.cli.devices import check_devices
from drkernel.cli.options import build, config_options, group, set_option
from drkernel.errors import DrKernelError, ServiceError
from drkernel.service.config import ServiceConfig
from drkernel.service.config import DEFAULT_PORT, default_db_path

console = Console(stderr=True)
DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"


@config_options(ServiceConfig, flags={"db_path": "--db", "slots_per_worker": "--slots"},
                envvars={"token": "KERNELGYM_TOKEN"})
def serve(
    host: str = typer.Option("127.0.0.1", help="interface to bind"),
    port: int = typer.Option(DEFAULT_PORT, min=1, max=65535, help="port to bind"),
    log_level: str = typer.Option("info", help="uvicorn and drkernel log level"),
    set_: Optional[List[str]] = set_option("service config (ServiceConfig)", "max_attempts=3"),
    unsafe_no_sandbox: bool = typer.Option(False, "--unsafe-no-sandbox",
                                           help="run solutions and references WITHOUT the OS sandbox (trusted "
                                                "code only)"),
    given: dict | None = None,
) -> None:
    """Run the KernelGym service (HTTP API, job store, device workers). Every ServiceConfig field
    is an option below; options left out keep the config's defaults."""
    import logging

    from drkernel.service import http_server
    from drkernel.service.app import create_app
    from drkernel.service.store import ServerLock

    given = dict(given or {})
    if unsafe_no_sandbox:
        given["evaluator_kwargs"] = {**(given.get("evaluator_kwargs") or {}), "unsafe_no_sandbox": True}
    try:
        config = build(ServiceConfig, "service config", given=given, sets=set_)
    except DrKernelError as e:
        refuse(str(e))
    check_devices([], workers=config.devices)
    try:
        ServerLock(config.db_path).acquire().release()  # a clear error before anything starts
        sock = http_server.listen(host, port)  # a busy port fails before any worker starts
        app = create_app(config)
    except DrKernelError as e:
        refuse(str(e))
    except OSError as e:
        refuse(f"cannot listen on {host}:{port}: {e.strerror or e} (choose another --port)")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if unsafe_no_sandbox:
        from drkernel.gym.orchestrator.sandbox import UNSAFE_WARNING

        console.print(f"[bold red]WARNING: {UNSAFE_WARNING}[/]")
    console.print(f"KernelGym service on http://{host}:{port} (docs at /docs), store {config.db_path}")
    if config.token is None:
        console.print(f"clients: tokens of `drkernel gym token add`, or the token in {config.db_path}.token")
    http_server.run(app, sock, config.head_timeout_s, config.max_connections, log_level, config.write_timeout_s)


def submit(
    problem: str = typer.Argument(..., help="problem key, name, id or a .py reference file"),
    solutions: List[Path] = typer.Argument(..., help="solution file(s) defining ModelNew"),
    source: str = typer.Option(
        "builtin", "--problems", "-p", help="problem source (see `drkernel problems list`)"
    ),
    config: str = typer.Option("{}", help="EvalConfig fields as JSON"),
    url: str = typer.Option(DEFAULT_URL, envvar="KERNELGYM_URL"),
    token: Optional[str] = typer.Option(None, envvar="KERNELGYM_TOKEN"),
    wait: bool = typer.Option(True, help="wait for the results (otherwise print job ids)"),
    timeout: Optional[float] = typer.Option(None, help="seconds to wait at most"),
) -> None:
    """Submit solutions to a running service; prints one JSON line per job."""
    from drkernel.gym.config import EvalConfig, EvalRequest
    from drkernel.problems import resolve_problem
    from drkernel.service.client import ServiceClient

    try:
        p = resolve_problem(problem, source)
        cfg = EvalConfig.from_dict(json.loads(config))
        requests = [
            # request_id: the file's name, not its path (the server has no business with our paths)
            EvalRequest(problem=p, solution=s.read_text(), config=cfg, request_id=s.name[:256])
            for s in solutions
        ]
    except (DrKernelError, OSError, json.JSONDecodeError) as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    with ServiceClient(url, token) as client:
        try:
            ids = client.submit_batch(requests)
            if not wait:
                for i, r in zip(ids, requests):
                    typer.echo(json.dumps({"id": i, "request_id": r.request_id}))
                return
            infos = client.collect(ids, timeout, progress=len(ids) > 1)
        except ServiceError as e:
            console.print(f"[red]service error:[/] {e}")
            raise typer.Exit(3)
    all_valid = True
    for i in ids:
        info = infos[i]
        line = {"id": i, "status": info.status, "error": info.error}
        if info.result is not None:
            line["result"] = info.result.to_dict()
        all_valid &= bool(info.result is not None and info.result.valid)
        typer.echo(json.dumps(line))
    if any(infos[i].status == "failed" for i in ids):
        raise typer.Exit(3)
    raise typer.Exit(0 if all_valid else 1)


def status(
    job_ids: List[str] = typer.Argument(None, help="job ids; none: the service's health, queue and workers"),
    url: str = typer.Option(DEFAULT_URL, envvar="KERNELGYM_URL"),
    token: Optional[str] = typer.Option(None, envvar="KERNELGYM_TOKEN"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show a service's health, queue and workers, or the status of jobs."""
    from drkernel.service.client import ServiceClient

    out = Console()
    with ServiceClient(url, token, retries=1) as client:
        try:
            if job_ids:
                _job_status(client, job_ids, as_json, out)
                return
            health, queue, workers = client.health(), client.queue(), client.workers()
        except ServiceError as e:
            console.print(f"[red]service error:[/] {e}")
            raise typer.Exit(3)
    if as_json:
        typer.echo(json.dumps({"health": health, "queue": queue, "workers": workers}))
        return
    out.print(
        f"[bold]{url}[/]  {health['status']}  version {health['version']}  "
        f"workers {health['workers_ready']}/{health['workers_total']} ready"
    )
    out.print("jobs: " + "  ".join(f"{k} {v}" for k, v in queue["counts"].items()))
    table = Table(title="workers")
    for col in (
        "name",
        "device",
        "device_name",
        "state",
        "in_flight",
        "slots",
        "completed",
        "infra_failures",
        "reason",
    ):
        table.add_column(col)
    for w in workers:
        table.add_row(
            *(
                str(w.get(c, ""))
                for c in (
                    "name",
                    "device",
                    "device_name",
                    "state",
                    "in_flight",
                    "slots",
                    "completed",
                    "infra_failures",
                    "reason",
                )
            )
        )
    out.print(table)


def _job_status(client, job_ids: list[str], as_json: bool, out: Console) -> None:
    table = Table(title="jobs")
    for col in ("id", "status", "attempts", "cached", "result", "error"):
        table.add_column(col)
    for job_id in job_ids:
        info = client.job(job_id)
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        "id": info.id,
                        "status": info.status,
                        "attempts": info.attempts,
                        "cached": info.cached,
                        "error": info.error,
                        "result": info.result.to_dict() if info.result else None,
                    }
                )
            )
            continue
        verdict = "" if info.result is None else f"{info.result.status.value} valid={info.result.valid}"
        table.add_row(info.id, info.status, str(info.attempts), str(info.cached), verdict, info.error or "")
    if not as_json:
        out.print(table)


token_app = group("Clients of a service and their bearer tokens.")
DB_OPTION = typer.Option(Path(default_db_path()), "--db", help="the service's SQLite job store")


@token_app.command("add")
def token_add(name: str = typer.Argument(..., help="client name"), db: Path = DB_OPTION) -> None:
    """Register a client; prints its token once (the store keeps only its hash)."""
    from drkernel.service.store import JobStore

    store = JobStore(db)
    try:
        token = store.add_client(name)
    except ValueError as e:
        console.print(f"[red]error:[/] {e}")
        raise typer.Exit(2)
    finally:
        store.close()
    typer.echo(token)


@token_app.command("remove")
def token_remove(name: str = typer.Argument(..., help="client name"), db: Path = DB_OPTION) -> None:
    """Remove a client: its token stops working at once (its jobs stay)."""
    from drkernel.service.store import JobStore

    store = JobStore(db)
    try:
        removed = store.remove_client(name)
    finally:
        store.close()
    if not removed:
        console.print(f"[red]error:[/] no client {name!r}")
        raise typer.Exit(2)


@token_app.command("list")
def token_list(db: Path = DB_OPTION) -> None:
    """The registered clients' names."""
    from drkernel.service.store import JobStore

    store = JobStore(db)
    try:
        for name in store.clients():
            typer.echo(name)
    finally:
        store.close()


def register(gym_app: typer.Typer) -> None:
    """Attach `serve`, `submit`, `status` and `token` to the `drkernel gym` group."""
    gym_app.command("serve")(serve)
    gym_app.command("submit")(submit)
    gym_app.command("status")(status)
    gym_app.add_typer(token_app, name="token")
