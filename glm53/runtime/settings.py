"""Command-line flags generated from config dataclasses, so a setting keeps one name and one default from the
flag to the code and the receipt.

Each field becomes `--name-with-dashes` (help text and choices from the field's metadata, the default shown
in --help). A field holding another config dataclass adds that config's flags under `--field.` (for example
`glm53 run --rl.temperature 0.5`), or without a prefix when its metadata says `flatten`. Every flag's
argparse default is None, so `config_from_args` can tell what was given: values come from the dataclass
default, then a preset's overrides, then the command line.

Metadata keys: help, choices, required (the command needs it although the dataclass has a default),
cli=False (no flag: set by the program).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any


def setting(default: Any = dataclasses.MISSING, help: str = "", *, choices=None, required: bool = False,
            cli: bool = True, default_factory: Any = dataclasses.MISSING, flatten: bool = False,
            skip: tuple[str, ...] = (), shown: str | None = None):
    """A dataclass field with its command-line description (`skip`: fields of a nested config given no flag;
    `shown`: the default as --help should describe it, when the value itself is resolved later)."""
    metadata = {"help": help, "required": required, "cli": cli, "flatten": flatten, "skip": tuple(skip),
                "shown": shown}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _base_type(hint):
    """(type, is_optional) with `X | None` unwrapped."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], True
    return hint, False


def _list_parser(item_type, hint):
    def parse(text: str):
        try:
            values = tuple(item_type(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {item_type.__name__}s such as "
                                             f"{'100,200,400' if item_type is int else '0.9,0.95'}, got {text!r}")
        fixed = typing.get_args(hint)
        if fixed and fixed[-1] is not Ellipsis and len(values) != len(fixed):
            raise argparse.ArgumentTypeError(f"expected {len(fixed)} comma-separated values, got {text!r}")
        return values
    return parse


def _describe(value) -> str:
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _flag_type(hint):
    base, _ = _base_type(hint)
    if typing.get_origin(base) is tuple:
        return _list_parser(typing.get_args(base)[0], base), "LIST"
    if base in (int, float, str):
        return base, base.__name__.upper()
    raise TypeError(f"no command-line form for type {hint!r}")


def add_config_arguments(parser: argparse.ArgumentParser, cls, prefix: str = "", title: str | None = None,
                         skip: tuple[str, ...] = ()) -> None:
    """Add a flag for every field of dataclass `cls` (and of the configs nested in it)."""
    hints = typing.get_type_hints(cls)
    group = parser.add_argument_group(title or (prefix.rstrip(".") or cls.__name__) + " settings")
    for f in dataclasses.fields(cls):
        hint, meta = hints[f.name], f.metadata
        if f.name in skip or meta.get("cli") is False:
            continue
        if dataclasses.is_dataclass(hint):
            nested = prefix if meta.get("flatten") else f"{prefix}{f.name}."
            add_config_arguments(parser, hint, nested, skip=tuple(meta.get("skip", ())))
            continue
        flag = "--" + prefix + f.name.replace("_", "-")
        default = _default(f)
        required = default is dataclasses.MISSING or bool(meta.get("required"))
        text = meta.get("help", "")
        if not required:
            text = f"{text} (default: {meta.get('shown') or _describe(default)})".strip()
        kwargs: dict[str, Any] = {"dest": prefix + f.name, "default": None, "help": text}
        if _base_type(hint)[0] is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"], kwargs["metavar"] = _flag_type(hint)
            if "choices" in meta:
                kwargs["choices"], kwargs["metavar"] = meta["choices"], None
        if required:
            kwargs["required"] = True
        group.add_argument(flag, **kwargs)


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


class Checks:
    """Collects what is wrong with a config, each problem naming its flag and the allowed values, and raises
    them together as one ValueError (before anything is written)."""

    def __init__(self, where: str):
        self.where, self.problems = where, []

    def require(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)

    def at_least(self, name: str, value, low) -> None:
        self.require(value >= low, f"{flag_name(name)} must be >= {low}, got {value}")

    def positive(self, name: str, value) -> None:
        self.require(value > 0, f"{flag_name(name)} must be > 0, got {value}")

    def within(self, name: str, value, low, high) -> None:
        self.require(low <= value <= high, f"{flag_name(name)} must lie in [{low}, {high}], got {value}")

    def one_of(self, name: str, value, choices) -> None:
        self.require(value in choices, f"{flag_name(name)} must be one of {', '.join(map(str, choices))}, got {value!r}")

    def done(self) -> None:
        if self.problems:
            raise ValueError(f"{self.where}: " + "; ".join(self.problems))


def default_checkpoints(value, candidates: tuple[int, ...], last: int) -> tuple[int, ...]:
    """Checkpoints as given (sorted, unique), or the default ones that fit a run of `last` steps; the last
    step is always added by the caller."""
    if value is None:
        return tuple(c for c in candidates if c <= last)
    return tuple(sorted(set(int(c) for c in value)))


def config_from_args(cls, args: argparse.Namespace, prefix: str = "", base: dict | None = None, **fixed):
    """Build `cls` from its defaults, then `base` (a preset's overrides, nested as dicts), then the flags given
    on the command line, then `fixed` (values the program sets)."""
    base = dict(base or {})
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        if f.name in fixed:
            values[f.name] = fixed[f.name]
        elif dataclasses.is_dataclass(hint):
            nested = prefix if f.metadata.get("flatten") else f"{prefix}{f.name}."
            values[f.name] = config_from_args(hint, args, nested, base.get(f.name))
        elif getattr(args, prefix + f.name, None) is not None:
            values[f.name] = getattr(args, prefix + f.name)
        elif f.name in base:
            values[f.name] = base[f.name]
    return cls(**values)


def setting_names(cls) -> list[str]:
    """Every setting a config accepts by name (fields of flattened nested configs included; fields set by the
    program are left out)."""
    hints = typing.get_type_hints(cls)
    names = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("cli") is False:
            continue
        if dataclasses.is_dataclass(hints[f.name]) and f.metadata.get("flatten"):
            names += setting_names(hints[f.name])
        else:
            names.append(f.name)
    return names


def _coerce(name: str, value, hint, where: str):
    base, optional = _base_type(hint)
    if value is None and optional:
        return None
    if typing.get_origin(base) is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where}: {name} must be a list, got {value!r}")
        item = typing.get_args(base)[0]
        return tuple(_coerce(name, v, item, where) for v in value)
    ok = (isinstance(value, bool) if base is bool else
          isinstance(value, int) and not isinstance(value, bool) if base is int else
          isinstance(value, (int, float)) and not isinstance(value, bool) if base is float else
          isinstance(value, str) if base is str else True)
    if not ok:
        raise ValueError(f"{where}: {name} must be a {getattr(base, '__name__', base)}, got {value!r}")
    return float(value) if base is float else value


def config_from_settings(cls, settings: dict, where: str, **fixed):
    """Build `cls` from a flat {setting name: value} dict (names as in `setting_names`, '-' or '_'), e.g. from
    a sweep spec; an unknown name or a value of the wrong type is a ValueError naming it."""
    given = {k.replace("-", "_"): v for k, v in settings.items()}
    known = set(setting_names(cls))
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"{where}: unknown setting {', '.join(map(repr, unknown))}; known settings are "
                         f"{', '.join(sorted(known))}")

    def build(c):
        hints = typing.get_type_hints(c)
        values = {}
        for f in dataclasses.fields(c):
            if f.name in fixed:
                values[f.name] = fixed[f.name]
            elif dataclasses.is_dataclass(hints[f.name]) and f.metadata.get("flatten"):
                nested = {n: given[n] for n in setting_names(hints[f.name]) if n in given}
                if nested:
                    base = dataclasses.asdict(_default(f)) if _default(f) is not dataclasses.MISSING else {}
                    values[f.name] = hints[f.name](**{**base, **{
                        n: _coerce(n, v, typing.get_type_hints(hints[f.name])[n], where) for n, v in nested.items()}})
            elif f.name in given:
                values[f.name] = _coerce(f.name, given[f.name], hints[f.name], where)
        return c(**values)

    try:
        return build(cls)
    except TypeError as err:  # a required field left out
        raise ValueError(f"{where}: {err}") from None
