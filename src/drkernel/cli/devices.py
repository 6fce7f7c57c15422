"""The one check that the devices a command names exist on this machine, run before any work starts.

Every entry point that takes a device (`gym eval`, `demo`, `gym serve --devices`, `bench run`,
`train` with ``model.device`` / ``rollout.device`` / ``eval.device``, `agent serve-model`, `organism`)
calls `check_devices` first. Without it `--device cuda` on a CPU build of torch reaches a judge, a
worker or the model and fails there with a traceback (``module 'torch._C' has no attribute
'_cuda_setDevice'``), or never exits; here it is one line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Iterable

import typer

from drkernel.devices import Device, DeviceKind
from drkernel.errors import ConfigError

__all__ = ["Device", "DeviceKind", "check_devices", "require_local_device", "require_worker_devices"]


def require_local_device(name: str, where: str = "--device") -> Device:
    """``name`` parsed; `ConfigError` when it names a CUDA device this machine lacks.

    ``auto`` and ``cpu`` always pass, without importing torch (auto falls back to the CPU), so
    `drkernel gym eval --device auto` never imports it here (~3.5 s).
    """
    device = Device.parse(name, where)
    if device.kind is DeviceKind.CUDA:
        device.resolve(where)
    return device


def require_worker_devices(spec: str, where: str = "--devices") -> None:
    """`gym serve`'s ``auto``, ``cpu:N`` or comma list of ``cuda:N``: each CUDA device must exist."""
    spec = spec.strip()
    if spec == "auto" or spec.partition(":")[0] == "cpu":
        return  # counts are checked by the service's own config
    for name in spec.split(","):
        if name.strip():
            require_local_device(name.strip(), where)


def check_devices(named: Iterable[tuple[str, str]], workers: str | None = None) -> None:
    """Exit 2 with one line unless every ``(where, name)`` device (and ``workers``, a `gym serve`
    ``--devices`` spec) exists here. Empty names are skipped (an unset optional device)."""
    try:
        for where, name in named:
            if name:
                require_local_device(name, where)
        if workers is not None:
            require_worker_devices(workers)
    except ConfigError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
