"""`drkernel gym`: evaluate solutions (the gym) and run or use the KernelGym service."""

from __future__ import annotations

import typer

from drkernel.cli import service as service_cli

app = typer.Typer(no_args_is_help=True, help="KernelGym: evaluate Triton solutions, run and use the service.")

# The service's commands (serve, submit, status) live in cli/service.py.
service_cli.register(app)
