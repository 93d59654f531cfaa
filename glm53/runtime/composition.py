"""Config dataclasses made of others: a field holding a config is walked (`leaves`: every setting with its flat
name and default), built from any source of values (`build`), written as one flat dict (`record`) and given flat
keyword arguments (`composed`). settings.py makes flags of the same walk.

A field's metadata (see settings.setting) says how its config nests: `flatten` (its settings keep their own names,
or take a stem: flatten="dev_" makes `samples` `dev_samples`), `skip` (settings the enclosing config sets: no flag,
no value from outside, left out of the record while at their default), `helps` (help texts for this use) and
`record` (False: left out; "nested": a flattened config recorded as a dict of its own, like the model). The
default instance of the field gives the nested settings' defaults: one config class serves several places with
other defaults (RL's dev evaluation samples 8 per task, `glm53 eval` one).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from typing import Any, Callable

MISSING = dataclasses.MISSING


@functools.cache
def type_hints(cls) -> dict:
    return typing.get_type_hints(cls)


def field_default(f: dataclasses.Field):
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One setting of a config, its nested configs walked: `name` is its flat name (dotted below a nested config
    that is not flattened: "rl.dev_samples"), `default` the value of the enclosing default instance."""
    name: str
    field: dataclasses.Field
    hint: Any
    default: Any
    skipped: bool  # no flag and no value from outside: an enclosing config sets it, or the program (cli=False)
    help: str = ""
    block: str | None = None  # its --help group (settings.BLOCKS): its field's, else the nearest field's above it


def stem_of(meta) -> str | None:
    """The name prefix of a flattened config's settings ("" or "dev_"), None when the field is not flattened."""
    flat = meta.get("flatten")
    return None if not flat else (flat if isinstance(flat, str) else "")


def nested(f, default, prefix: str, skip, dotted: bool, helps=None):
    """(prefix, skip, default instance, helps) of the config in field `f`, or None when it is walked no further."""
    stem = stem_of(f.metadata)
    if stem is None and not dotted:
        return None
    inner_skip, inner_helps = set(f.metadata.get("skip", ())), dict(f.metadata.get("helps", {}))
    if stem is not None:
        inner_skip |= {s[len(stem):] for s in skip if s.startswith(stem)}
        inner_helps.update({k[len(stem):]: v for k, v in (helps or {}).items() if k.startswith(stem)})
    return (prefix + stem if stem is not None else f"{prefix}{f.name}."), inner_skip, \
        (None if default is MISSING else default), inner_helps


def leaves(cls, defaults=None, prefix: str = "", skip=(), dotted: bool = True, helps=None,
           block: str | None = None) -> list[Leaf]:
    """Every setting of `cls` in field order, flattened configs (and with `dotted`, other nested ones) walked;
    `block`: the --help group of the settings whose fields (and the fields above them) name none."""
    hints = type_hints(cls)
    found = []
    for f in dataclasses.fields(cls):
        default = getattr(defaults, f.name) if defaults is not None else field_default(f)
        inner = nested(f, default, prefix, skip, dotted, helps) if dataclasses.is_dataclass(hints[f.name]) else None
        here = f.metadata.get("block") or block
        if inner is not None:
            found += leaves(hints[f.name], inner[2], inner[0], inner[1], dotted, inner[3], here)
        else:
            found.append(Leaf(prefix + f.name, f, hints[f.name], default,
                              f.name in skip or f.metadata.get("cli") is False,
                              (helps or {}).get(f.name, f.metadata.get("help", "")), here))
    return found


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


def build(cls, take: Callable[[Leaf], Any], defaults=None, prefix: str = "", skip=(), dotted: bool = True):
    """An instance of `cls`: each setting from `take(leaf)` where that gives one (not MISSING), else from
    `defaults` (an instance) or the field's own default; nested configs built the same way."""
    hints = type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = getattr(defaults, f.name) if defaults is not None else MISSING
        inner = nested(f, field_default(f) if defaults is None else default, prefix, skip, dotted) \
            if dataclasses.is_dataclass(hints[f.name]) else None
        if inner is not None:
            values[f.name] = restemmed(f, hints[f.name], lambda: build(hints[f.name], take, inner[2], inner[0],
                                                                           inner[1], dotted))
            continue
        value = take(Leaf(prefix + f.name, f, hints[f.name], default, f.name in skip or f.metadata.get("cli") is False))
        if value is not MISSING:
            values[f.name] = value
        elif default is not MISSING:
            values[f.name] = default
    return cls(**values)


def restemmed(f, cls, make: Callable[[], Any]):
    """make() for the config in field `f`; a problem it raises names its flags under the field's stem
    (--samples -> --dev-samples)."""
    stem = stem_of(f.metadata)
    try:
        return make()
    except ValueError as err:
        if not stem:
            raise
        names = {leaf.name for leaf in leaves(cls, dotted=False)}
        raise ValueError(re.sub(r"--([a-z][a-z0-9-]*)", lambda m: flag_name(stem + m.group(1).replace("-", "_"))
                                if m.group(1).replace("-", "_") in names else m.group(0), str(err))) from None


def record(cfg, prefix: str = "", skip=(), defaults=None) -> dict:
    """`cfg` as receipts and run folders hold it: one flat dict, a flattened config's settings by their flat names
    (its field itself unnamed), other nested configs as dicts; tuples as lists. A setting an enclosing config
    gives no flag is left out while it holds its default, one with record=False always."""
    out = {}
    for f in dataclasses.fields(cfg):
        value, meta = getattr(cfg, f.name), f.metadata
        default = getattr(defaults, f.name) if defaults is not None else field_default(f)
        if meta.get("record") is False or (f.name in skip and value == default):
            continue
        if dataclasses.is_dataclass(value) and stem_of(meta) is not None and meta.get("record") != "nested":
            inner_prefix, inner_skip, inner_default, _ = nested(f, default, prefix, skip, dotted=False)
            out.update(record(value, inner_prefix, inner_skip, inner_default))
        elif dataclasses.is_dataclass(value):
            out[prefix + f.name] = value.to_dict() if stem_of(meta) is None else dataclasses.asdict(value)
        else:
            out[prefix + f.name] = list(value) if isinstance(value, tuple) else value
    return out


def composed(cls):
    """Let `cls(...)` (and so `dataclasses.replace`) take the settings of its flattened configs by their flat
    names: `PretrainConfig(out="r", device="cpu")` is `PretrainConfig(out="r", runtime=RuntimeConfig(device="cpu"))`."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **route(cls, kwargs))

    cls.__init__ = __init__
    return cls


def route(cls, kwargs: dict) -> dict:
    """`kwargs` with each flat name of a flattened config's setting gathered into that config (built from the
    given one, or the field's default)."""
    hints = type_hints(cls)
    loose = {k: v for k, v in kwargs.items() if k not in hints}
    if not loose:
        return kwargs
    routed = {k: v for k, v in kwargs.items() if k in hints}
    for f in dataclasses.fields(cls):
        stem = stem_of(f.metadata)
        if stem is None or not dataclasses.is_dataclass(hints[f.name]):
            continue
        names = {leaf.name for leaf in leaves(hints[f.name], dotted=False)} | \
            {inner.name for inner in dataclasses.fields(hints[f.name]) if inner.init}
        mine = {k[len(stem):]: loose.pop(k) for k in list(loose) if k.startswith(stem) and k[len(stem):] in names}
        if mine:
            base = routed.get(f.name, field_default(f))
            routed[f.name] = restemmed(f, hints[f.name], lambda: hints[f.name](**mine) if base is MISSING
                                        else dataclasses.replace(base, **mine))
    if loose:
        raise TypeError(f"{cls.__name__}() got unexpected keyword arguments: {', '.join(sorted(loose))}")
    return routed
