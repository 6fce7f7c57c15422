"""The one way a command line overrides a config: ``--set key.sub=value``, the same on every command.

Every command that builds a config (`gym eval`, `demo`, `gym serve`, `bench run`, `train`, `sft`)
takes ``--set`` for any field of it, parsed and checked by the project's one loader
(`drkernel.config`: unknown keys named, types checked, choices from the enums). The few named
options a command keeps (``--device``, ``--samples``, ...) are shortcuts for one field each: they
default to None, so the config's own default applies unless they are given; the CLI restates no
default.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import typer

from drkernel.config import apply_overrides, from_mapping, merge

T = TypeVar("T")
HELP_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 120}
"""Every command: ``-h`` as well as ``--help``; help wraps at the terminal's width (up to 120)."""


def group(help_text: str) -> typer.Typer:
    """A sub-command group with the project's help settings (plain click help: wrapped, never cut)."""
    return typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None,
                       context_settings=HELP_SETTINGS, help=help_text)


def set_option(what: str, example: str) -> Any:
    """The ``--set/-s KEY=VALUE`` option (repeatable) for fields of ``what``."""
    return typer.Option(None, "--set", "-s", metavar="KEY=VALUE",
                        help=f"set any field of the {what} (dotted for nested sections, the value "
                             f"read as YAML), e.g. {example}; repeatable, applied last")


def choices(name: str, values: Iterable[str]) -> type[enum.Enum]:
    """A str Enum of ``values`` (a config's allowed strings), so the CLI lists and checks them."""
    return enum.Enum(name, {v: v for v in values}, type=str)  # type: ignore[return-value]


def default(cls: type, name: str) -> Any:
    """The default of ``cls``'s field ``name``, for help texts (the CLI never restates it)."""
    (f,) = [f for f in dataclasses.fields(cls) if f.name == name]
    value = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    return value.value if isinstance(value, enum.Enum) else value


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"eval.device": "cpu", "samples": 1}`` as nested mappings; None values (options not given)
    and empty mappings are left out; enums become their values."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        if value is None:
            continue
        *parents, leaf = key.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value.value if isinstance(value, enum.Enum) else value
    return out


def build(cls: type[T], label: str, base: Mapping[str, Any] | None = None,
          given: Mapping[str, Any] | None = None, sets: Sequence[str] | None = None,
          make: Callable[[dict[str, Any]], T] | None = None) -> T:
    """``cls`` from ``base`` (a config file's mapping), then the shortcut options ``given`` (dotted
    keys, None = not given), then ``--set`` items; `ConfigError` names every problem at once."""
    data = apply_overrides(merge(base or {}, nest(given or {})), list(sets or ()))
    return make(data) if make is not None else from_mapping(cls, data, label)
