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
import functools
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, TypeVar

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


def field_docs(cls: type) -> dict[str, str]:
    """Each field's docstring (the string under it in the class body), whitespace collapsed."""
    import ast
    import inspect
    import textwrap

    from drkernel import pyast

    body = pyast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, after in zip(body, body[1:]):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)):
            docs[node.target.id] = " ".join(str(after.value.value).split())
    return docs


def _option_type(hint: Any) -> Any:
    """The click-facing type of a field: its scalar or enum type; anything else (a mapping, a list)
    is a string read as YAML (JSON is YAML)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if len(args) == 1 and typing.get_origin(hint) in (typing.Union, types.UnionType) else hint
    scalar = base in (int, float, str, bool) or (isinstance(base, type) and issubclass(base, enum.Enum))
    return base if scalar else str


def config_options(cls: type, flags: Mapping[str, str] | None = None, skip: Iterable[str] = (),
                   envvars: Mapping[str, str] | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Give a command one option per field of the config dataclass ``cls``, generated from it.

    The flag is ``--field-name`` (``flags`` renames; a bool is ``--x/--no-x``); the help is the
    field's docstring and its default is the config's. Every option defaults to None, so only what
    is given reaches the config. The command receives them as ``given`` (field -> value, YAML read
    for non-scalar fields)."""
    flags, envvars, skip = dict(flags or {}), dict(envvars or {}), set(skip)
    docs, hints = field_docs(cls), typing.get_type_hints(cls)

    def option(f: dataclasses.Field) -> inspect.Parameter:
        kind = _option_type(hints[f.name])
        flag = flags.get(f.name, "--" + f.name.replace("_", "-"))
        decl = f"{flag}/--no-{flag[2:]}" if kind is bool else flag
        shown = default(cls, f.name)
        help_text = f"{docs.get(f.name, f.name)} (config: {f.name}; default {shown!r})"
        opt = typer.Option(None, decl, help=help_text, envvar=envvars.get(f.name), show_envvar=False)
        return inspect.Parameter(f"cfg__{f.name}", inspect.Parameter.KEYWORD_ONLY, default=opt,
                                 annotation=Optional[kind])

    generated = [option(f) for f in dataclasses.fields(cls) if f.name not in skip]
    as_yaml = {f.name for f in dataclasses.fields(cls)
               if _option_type(hints[f.name]) is str and hints[f.name] not in (str, Optional[str])}

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        own = [p for name, p in inspect.signature(fn).parameters.items() if name != "given"]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> T:
            given = {k[5:]: kwargs.pop(k) for k in list(kwargs) if k.startswith("cfg__")}
            for name in as_yaml & {k for k, v in given.items() if v is not None}:
                given[name] = _yaml(given[name], flags.get(name, "--" + name.replace("_", "-")))
            return fn(**kwargs, given=given)

        command.__signature__ = inspect.Signature([*own, *generated])  # type: ignore[attr-defined]
        command.__annotations__ = {k: v for k, v in typing.get_type_hints(fn).items() if k != "given"}
        del command.__wrapped__  # typer must read the generated signature, not fn's
        return command

    return wrap


def _yaml(text: str, flag: str) -> Any:
    import yaml

    from drkernel.cli.checks import refuse

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        refuse(f"{flag}: not valid YAML or JSON ({' '.join(str(e).split())})")
