"""The one configuration loader: frozen dataclasses built from YAML / JSON mappings, types checked.

Every configuration of the project (`drkernel.gym.config.EvalConfig`, `drkernel.bench.run.BenchConfig`,
`drkernel.sft.config.SFTConfig`, `drkernel.service.config.ServiceConfig`,
`drkernel.rl.config.TrainConfig`, `drkernel.reward.RewardConfig`, ...) is a frozen dataclass with a
docstring under every field, built by :func:`from_mapping`:

- an unknown key is an error naming it (and the keys that are known);
- a value of the wrong type is an error naming the dotted key (``optim.lr: expected float``); a bool
  is not an int, an int is accepted as a float, YAML's string ``"1e-6"`` is accepted as a float;
- a choice is an ``Enum`` field: the error lists its values, so the choices are written once, in the
  enum;
- nested dataclasses are nested mappings (``eval: {trials: 5}``), built with the same rules;
- a dataclass's own ``__post_init__`` checks (ranges, combinations) raise ``ConfigError``; they are
  reported with the other problems, prefixed by where the section sits;
- every problem found is reported at once, in one ``ConfigError``.

Torch-free and stdlib-only (``yaml`` is imported when a file is read), so the gym and the service can
use it.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from drkernel.errors import ConfigError

T = TypeVar("T")


def from_mapping(cls: type[T], data: Any, name: str | None = None) -> T:
    """``cls`` built from ``data`` (nested mappings); raises ConfigError listing every problem."""
    errors: list[str] = []
    built = _build(cls, data, "", errors, name or cls.__name__)
    if len(errors) == 1 and errors[0].startswith("invalid "):
        raise ConfigError(errors[0])  # the class's own check, already labelled
    if errors:
        raise ConfigError(f"invalid {name or cls.__name__}: " + "; ".join(errors))
    return built


def load_yaml(cls: type[T], path: str | Path, overrides: Sequence[str] = (), name: str | None = None) -> T:
    """Read a YAML mapping, apply ``key.sub=value`` overrides (values parsed as YAML), build ``cls``."""
    label = name or cls.__name__
    return from_mapping(cls, apply_overrides(read_yaml_mapping(path, label), overrides), label)


def read_yaml_mapping(path: str | Path, label: str) -> dict[str, Any]:
    """The mapping a YAML file holds (empty file: ``{}``); ConfigError naming ``label`` otherwise."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise ConfigError(f"cannot read {label} {path}: {e}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{label} {path} is not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{label} {path}: expected a mapping, got {type(data).__name__}")
    return data


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over``'s keys on top; where both hold a mapping the two merge, key by key."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, Mapping) and isinstance(out.get(key), Mapping)
        out[key] = merge(out[key], value) if both else value
    return out


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``["optim.lr=1e-5", "model.lora.enabled=true"]`` applied to nested ``data`` (a copy)."""
    import yaml

    out = _deep_copy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} is not key=value")
        *parents, leaf = key.strip().split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
        try:
            node[leaf] = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ConfigError(f"override {item!r}: the value is not valid YAML ({e})") from e
    return out


def to_plain(value: Any) -> Any:
    """A dataclass (or anything inside one) as JSON / YAML-ready values: enums by value, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    return value


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def _build(cls: type, data: Any, where: str, errors: list[str], label: str = "top-level") -> Any:
    """One dataclass from a mapping; appends problems to ``errors`` and returns None on any."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        errors.append(f"{where or 'config'}: expected a mapping, got {data!r}")
        return None
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(str(k) for k in set(data) - set(fields))
    if unknown:
        errors.append(f"unknown {where or label} keys: {unknown} (known: {sorted(fields)})")
    required = sorted(
        n for n, f in fields.items()
        if n not in data and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    if required:
        errors.append(f"{where or 'config'}: missing required keys {required}")
    before = len(errors)
    values = {k: _coerce(v, hints[k], _join(where, k), errors) for k, v in data.items() if k in fields}
    if len(errors) > before or unknown or required:
        return None
    try:
        return cls(**values)
    except ConfigError as e:
        errors.append(f"{where}: {e}" if where else str(e))
    except (TypeError, ValueError) as e:
        errors.append(f"{where or cls.__name__}: {e}")
    return None


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _coerce(value: Any, hint: Any, where: str, errors: list[str]) -> Any:
    """``value`` checked against the type ``hint``; appends a problem naming ``where`` on a mismatch."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"{where}: the loader handles Optional[X], not {hint}")
        return _coerce(value, inner[0], where, errors)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where, errors)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum(value, hint, where, errors)
    if origin is tuple or origin is list or hint in (tuple, list):
        return _sequence(value, hint, where, errors)
    if origin in (dict, Mapping, typing.Mapping) or hint in (dict, Mapping):
        if not isinstance(value, Mapping):
            errors.append(f"{where}: expected a mapping, got {value!r}")
            return value
        return dict(value)
    return _scalar(value, hint, where, errors)


def _enum(value: Any, hint: type[enum.Enum], where: str, errors: list[str]) -> Any:
    try:
        return hint(value)
    except ValueError:
        errors.append(f"{where}={value!r} (one of {[m.value for m in hint]})")
        return value


def _sequence(value: Any, hint: Any, where: str, errors: list[str]) -> Any:
    origin, args = typing.get_origin(hint) or hint, typing.get_args(hint)
    if not isinstance(value, (list, tuple)):
        errors.append(f"{where}: expected a list, got {value!r}")
        return value
    if not args:
        inner = [Any] * len(value)
    elif origin is list or (len(args) == 2 and args[1] is Ellipsis):
        inner = [args[0]] * len(value)
    else:
        inner = list(args)
        if len(inner) != len(value):
            errors.append(f"{where}: expected {len(inner)} items, got {len(value)}")
            return value
    items = [_coerce(v, h, f"{where}[{i}]", errors) for i, (v, h) in enumerate(zip(value, inner))]
    return tuple(items) if origin is tuple else items


def _scalar(value: Any, hint: Any, where: str, errors: list[str]) -> Any:
    if hint is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if hint is float and isinstance(value, str):
        try:
            return float(value)  # YAML 1.1 reads "1e-6" (no dot) as a string
        except ValueError:
            pass
    if hint in (bool, int, str) and isinstance(value, hint) and not (hint is int and isinstance(value, bool)):
        return value
    errors.append(f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")
    return value
