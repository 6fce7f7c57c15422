"""A cap on what a host draw allocates, for measuring a problem whose ``get_inputs`` cannot run on
the meta device (it reads values: ``int(offsets[-1])``, ``.tolist()``), `drkernel.problems.scaling.measure`.

`DrawCap` sizes every op on meta copies of its arguments before it runs, so an allocation past the
cap never happens; an op that meta cannot size (``.item()``, a data-dependent shape) is counted after
it ran. Views and in-place results allocate nothing and are not counted. Allocations are summed, not
tracked while alive: temporaries count too, which only makes the cap stricter.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

__all__ = ["DrawCap", "TooLarge"]


class TooLarge(Exception):
    """Raised inside a `DrawCap` by the op that would take the draw past its cap."""


class DrawCap(TorchDispatchMode):
    """A dispatch mode that raises `TooLarge` once the ops under it would allocate more than ``limit``
    bytes in all."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit, self.used = limit, 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        counted = any(r.alias_info is not None for r in func._schema.returns)  # a view or an in-place op
        if not counted:
            try:
                sized = func(*_meta(args), **{k: torch.device("meta") if k == "device" else _meta(v)
                                             for k, v in kwargs.items()})
            except Exception:  # noqa: BLE001 - no meta kernel, or a data-dependent size: count after
                sized = None
            else:
                self._count(sized)
                counted = True
        out = func(*args, **kwargs)
        if not counted:
            self._count(out)
        return out

    def _count(self, out: Any) -> None:
        leaves = out if isinstance(out, (tuple, list)) else [out]
        self.used += sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))
        if self.used > self.limit:
            raise TooLarge(f"measuring the inputs drew more than {self.limit} bytes")


def _meta(value: Any) -> Any:
    """``value`` with every tensor replaced by a meta tensor of its shape and dtype."""
    return tree_map(lambda v: v.to("meta") if isinstance(v, torch.Tensor) else v, value)
