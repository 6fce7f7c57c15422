"""Checks of a command's options that run before any work, so a bad option costs nothing.

An output folder that cannot be written would otherwise fail after the work it was to hold (a demo's
81 evaluations, a benchmark's episodes); a negative limit would silently drop problems. Each check
prints one line and exits with code 2 (bad usage).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import NoReturn

import typer


def refuse(message: str) -> NoReturn:
    """One line on stderr, exit code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def writable_dir(path: Path, option: str = "--out") -> Path:
    """``path`` as a folder this process can create or write into; refused otherwise.

    Nothing is left behind: the nearest existing ancestor must be a folder in which a temporary
    file can be made (an existing ``path`` itself must be a folder).
    """
    if path.exists() and not path.is_dir():
        refuse(f"{option} {path}: exists and is not a folder")
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        refuse(f"{option} {path}: {probe} is not a folder")
    try:  # os.access says yes to root on a read-only or virtual file system (/proc)
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as e:
        refuse(f"{option} {path}: {probe} is not writable ({e.strerror})")
    return path


def at_least(value: float | None, low: float, option: str) -> None:
    """Refuse ``value < low`` (None: the option was not given)."""
    if value is not None and value < low:
        refuse(f"{option} {value:g}: must be at least {low:g}")


def positive(value: float | None, option: str) -> None:
    """Refuse ``value <= 0`` (None: the option was not given)."""
    if value is not None and value <= 0:
        refuse(f"{option} {value:g}: must be greater than 0")
