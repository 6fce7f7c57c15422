"""The one device type: what a command line or a config names (``auto``, ``cpu``, ``cuda``, ``cuda:N``)
and how it resolves.

Importing this module does not import torch: the orchestrator guesses where its judge will run
(`Device.guess`) without paying torch's import, while the judge, the trainer and the organism resolve
the same name with torch (`Device.resolve`). ``auto`` is a GPU when one is visible, else the CPU; a
bare ``cuda`` is ``cuda:0``.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from typing import Any

from drkernel.errors import ConfigError


class DeviceKind(str, enum.Enum):
    """What a device name asks for."""

    AUTO = "auto"  # a GPU when one is visible, else the CPU
    CPU = "cpu"
    CUDA = "cuda"


@dataclass(frozen=True)
class Device:
    """A device as a command line or a config names it."""

    kind: DeviceKind
    index: int | None = None

    @classmethod
    def parse(cls, name: str, where: str = "--device") -> Device:
        """``name`` parsed; `ConfigError` naming ``where`` for any other spelling."""
        head, sep, index = str(name).strip().partition(":")
        if head in {k.value for k in DeviceKind} and not sep:
            return cls(DeviceKind(head))
        if head == DeviceKind.CUDA.value and index.isdigit():
            return cls(DeviceKind.CUDA, int(index))
        raise ConfigError(f"{where} {name!r}: expected auto, cpu, cuda or cuda:N")

    def __str__(self) -> str:
        return self.kind.value + ("" if self.index is None else f":{self.index}")

    @property
    def is_cpu(self) -> bool:
        return self.kind is DeviceKind.CPU

    def guess(self) -> str:
        """The concrete name `resolve` will give, guessed without importing torch: ``auto`` is
        ``cuda:0`` where the driver's control node exists and ``CUDA_VISIBLE_DEVICES`` hides nothing,
        else ``cpu``. A wrong guess costs the caller a restart, never a wrong device."""
        if self.kind is DeviceKind.AUTO:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            if visible is not None and visible.strip() in ("", "-1"):
                return "cpu"
            return "cuda:0" if os.path.exists("/dev/nvidiactl") else "cpu"
        return "cpu" if self.is_cpu else f"cuda:{self.index or 0}"

    def resolve(self, where: str = "device") -> Any:
        """The ``torch.device``; `ConfigError` when this names CUDA and CUDA is not available."""
        import torch

        if self.kind is DeviceKind.AUTO:
            return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
        if self.is_cpu:
            return torch.device("cpu")
        if not torch.cuda.is_available():
            build = "this torch build has no CUDA support" if torch.version.cuda is None else "no CUDA device is visible"
            raise ConfigError(f"{where} {self}: CUDA is not available ({build}, torch {torch.__version__}); "
                              "use cpu or auto, or install a CUDA build of torch (TORCH_SPEC, see the Makefile)")
        if (self.index or 0) >= torch.cuda.device_count():
            raise ConfigError(f"{where} {self}: only {torch.cuda.device_count()} CUDA device(s) visible")
        return torch.device(f"cuda:{self.index or 0}")

    def for_rank(self, local_rank: int, world_size: int, where: str = "device") -> Device:
        """The device of rank ``local_rank`` of ``world_size`` on one host: ``auto`` / ``cuda`` become
        ``cuda:<local_rank>`` where CUDA is there; one GPU named for every rank is an error."""
        if world_size == 1 or self.is_cpu:
            return self
        if self.kind is DeviceKind.AUTO:
            import torch

            if not torch.cuda.is_available():
                return self
        if self.index is None:
            return Device(DeviceKind.CUDA, local_rank)
        raise ConfigError(f"{where}={str(self)!r} puts every one of the {world_size} ranks on one device; "
                          "use 'auto' or 'cuda' (rank r uses cuda:<local rank r>) or 'cpu'")


def resolve(name: str, where: str = "device") -> Any:
    """``torch.device`` for a device name (see `Device.resolve`)."""
    return Device.parse(name, where).resolve(where)
