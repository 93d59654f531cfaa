"""Command-line flags generated from config dataclasses, so a setting keeps one name and one default from the
flag to the code and the receipt.

Each field becomes `--name-with-dashes` (help text and choices from the field's metadata, the default shown
in --help). A field holding another config dataclass adds that config's flags under `--field.` (for example
`glm53 run --rl.temperature 0.5`), or without a prefix when its metadata says `flatten` (`flatten="dev_"`: under
that stem, `--dev-samples`); composition.py walks the nesting, and its `composed` and `record` give a config flat
keyword arguments and the flat dict receipts hold. Every flag's argparse default is None, so `config_from_args`
can tell what was given: values come from the default, then a preset's overrides, then the command line.

Metadata keys: help, choices and bounds (checked by `Checks.declared`: at_least, above, at_most, below; every
float must be finite), required (the command needs it although the dataclass
has a default), cli=False (no flag: set by the program), repeatable (a text setting whose flag may be given several
times, the values joined by commas), shown (the default as --help describes it), block (below), and for a
nested config flatten, skip, helps and record (composition.py).

--help lists a command's flags in groups by block (`BLOCKS`: model, optimization, data, runtime, retention, the
command's own, and RL's and decoding's sections). A flag's block is its setting's `block`, else that of the nearest
field above it that names one (PretrainConfig's `model` field says block="model", so every ModelConfig setting is in
it, a new one too), else the `block` the command gives `add_config_arguments` for a config added alone (`glm53
info`'s ModelConfig). A flag left with none stops the parser from being built, naming it. Simplification: a
setting's block is one per place its config is used (RL's sampling is "rollouts", the dev evaluation's sampling
"dev evaluation"), not per setting wherever it appears.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from typing import Any

from .composition import (MISSING, Leaf, build, field_default, flag_name, leaves, nested,  # noqa: F401 - flag_name
                          stem_of, type_hints)
from .setting_history import read_as_today


# The largest seed any setting takes: torch.manual_seed refuses 2**64 and more, and the streams add offsets to a
# seed (rl.py's refill stream, a sweep's per-step image seeds), so a seed keeps well below that; 2**32 - 1 is the
# range numpy and most tools take too.
MAX_SEED = 2 ** 32 - 1

# The --help groups, in the order they are listed; "command" holds the command's own few (out, suite, seed, ...)
# under the command's title, first. The sections after data are RL's and decoding's, where the five do not fit.
BLOCKS = ("command", "model", "optimization", "data", "rollouts", "rewards", "dev evaluation", "decoding", "runtime",
          "retention")


def setting(default: Any = MISSING, help: str = "", *, choices=None, required: bool = False,
            cli: bool = True, default_factory: Any = MISSING, flatten: bool | str = False,
            skip: tuple[str, ...] = (), shown: str | None = None, record: bool | str = True,
            helps: dict[str, str] | None = None, at_least=None, above=None, at_most=None, below=None,
            unbounded: bool = False, repeatable: bool = False, block: str | None = None):
    """A dataclass field with its command-line description (`skip`: fields of a nested config given no flag;
    `shown`: the default as --help should describe it, when the value itself is resolved later; `helps`: the help
    of a nested config's settings where this use of it says more; `block`: its --help group, one of BLOCKS, for a
    nested config the group of its settings that name none).

    A number's meaning is declared here, once: `at_least`/`above` and `at_most`/`below` bound it (inclusive /
    exclusive), `unbounded=True` says any finite value means something (a seed, a penalty whose sign the config
    checks against others). `Checks.declared` enforces them, and tests/runtime/test_checks_by_meaning.py makes a
    table of bad values from them, so a number field cannot be added without saying which values it takes."""
    if block is not None and block not in BLOCKS:
        raise ValueError(f"setting block {block!r} is not one of {', '.join(BLOCKS)}")
    metadata = {"help": help, "required": required, "cli": cli, "flatten": flatten, "skip": tuple(skip),
                "shown": shown, "record": record, "helps": dict(helps or {}), "repeatable": repeatable, "block": block}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    bounds = {k: v for k, v in (("at_least", at_least), ("above", above), ("at_most", at_most), ("below", below))
              if v is not None}
    if bounds or unbounded:
        metadata["bounds"] = bounds
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


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


class _JoinRepeated(argparse.Action):
    """A text flag given several times: its values joined by commas (`--reward a --reward b` is `--reward a,b`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        earlier = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, values if earlier is None else f"{earlier},{values}")


def add_argument(group, leaf: Leaf) -> None:
    """The flag of one setting."""
    meta = leaf.field.metadata
    required = leaf.default is MISSING or bool(meta.get("required"))
    text = leaf.help
    if not required:
        text = f"{text} (default: {meta.get('shown') or _describe(leaf.default)})".strip()
    # argparse formats help with %: a literal one (the sparse-layer rule's "(i + 1) % sparse_every") is doubled
    kwargs: dict[str, Any] = {"dest": leaf.name, "default": None, "help": text.replace("%", "%%")}
    if _base_type(leaf.hint)[0] is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    else:
        kwargs["type"], kwargs["metavar"] = _flag_type(leaf.hint)
        if "choices" in meta:
            kwargs["choices"], kwargs["metavar"] = meta["choices"], None
        if meta.get("repeatable"):
            kwargs["action"] = _JoinRepeated
    if required:
        kwargs["required"] = True
    group.add_argument(flag_name(leaf.name), **kwargs)


def add_config_arguments(parser: argparse.ArgumentParser, cls, prefix: str = "", title: str | None = None,
                         skip: tuple[str, ...] = (), defaults=None, helps: dict[str, str] | None = None,
                         block: str | None = None, notes: dict[str, str] | None = None) -> None:
    """Add a flag for every setting of dataclass `cls` (and of the configs nested in it), grouped by block in the
    order of BLOCKS: the command's own under `title`, the others under the block's name (a config that is not
    flattened, e.g. `glm53 run`'s pretrain, gets its own groups: "pretrain model"). `defaults`: the instance whose
    values --help shows (default: the class's); `helps`: help texts that say more here than the fields' own;
    `block`: the block of settings that name none (a config added alone); `notes`: a line under a block's group."""
    for name in (block, *(notes or {})):
        if name is not None and name not in BLOCKS:
            raise ValueError(f"block {name!r} is not one of {', '.join(BLOCKS)}")
    flags = list(_flags(cls, prefix, tuple(skip), defaults, helps or {}, block))
    stems = list(dict.fromkeys(stem for stem, _ in flags))  # the config's own, then each nested one's
    groups: dict[tuple[str, str], Any] = {}
    for stem, leaf in sorted(flags, key=lambda flag: (stems.index(flag[0]), BLOCKS.index(_block_of(flag[1])))):
        if (stem, leaf.block) not in groups:
            name = stem.rstrip(".")
            heading = ((title or (name or cls.__name__) + " settings") if stem == prefix else name) \
                if leaf.block == "command" else f"{name} {leaf.block}" if stem else leaf.block
            note = (notes or {}).get(leaf.block) if stem == prefix else None
            groups[stem, leaf.block] = parser.add_argument_group(heading, note)
        add_argument(groups[stem, leaf.block], leaf)


def _flags(cls, prefix: str, skip: tuple[str, ...], defaults, helps: dict[str, str], block: str | None):
    """(the prefix of the config it belongs to, its Leaf) for every flag of `cls`, in field order."""
    hints = type_hints(cls)
    for f in dataclasses.fields(cls):
        default = getattr(defaults, f.name) if defaults is not None else field_default(f)
        here = f.metadata.get("block") or block
        if dataclasses.is_dataclass(hints[f.name]) and stem_of(f.metadata) is None:
            if f.name not in skip and f.metadata.get("cli") is not False:
                yield from _flags(hints[f.name], f"{prefix}{f.name}.", tuple(f.metadata.get("skip", ())),
                                  None if default is MISSING else default, {}, here)
        elif dataclasses.is_dataclass(hints[f.name]):
            inner_prefix, inner_skip, inner_default, inner_helps = nested(f, default, prefix, skip, dotted=False)
            for leaf in leaves(hints[f.name], inner_default, inner_prefix, inner_skip, False, inner_helps, here):
                if not leaf.skipped:
                    yield prefix, leaf
        elif not (f.name in skip or f.metadata.get("cli") is False):
            yield prefix, Leaf(prefix + f.name, f, hints[f.name], default, False,
                               helps.get(f.name, f.metadata.get("help", "")), here)


def _block_of(leaf: Leaf) -> str:
    if leaf.block is None:
        raise TypeError(f"{flag_name(leaf.name)} is in no --help block: give its setting (or the config field above "
                        f"it) block=, one of {', '.join(BLOCKS)}")
    return leaf.block


BOUND_WORDS = {"at_least": ">=", "above": ">", "at_most": "<=", "below": "<"}  # setting()'s bounds, as said


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
        self.require(value in choices,
                     f"{flag_name(name)} must be one of {', '.join(map(str, choices))}, got {value!r}")

    def declared(self, cfg) -> None:
        """Each field of `cfg` holds what its metadata declares (see `setting`): one of its choices, a finite
        number, within its bounds. None is an optional setting left unset; nested configs check themselves."""
        for f in dataclasses.fields(cfg):
            value = getattr(cfg, f.name)
            if value is None:
                continue
            if "choices" in f.metadata:
                self.one_of(f.name, value, f.metadata["choices"])
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if not math.isfinite(value):
                self.problems.append(f"{flag_name(f.name)} must be a finite number, got {value}")
                continue
            for key, bound in f.metadata.get("bounds", {}).items():
                ok = {"at_least": value >= bound, "above": value > bound, "at_most": value <= bound,
                      "below": value < bound}[key]
                self.require(ok, f"{flag_name(f.name)} must be {BOUND_WORDS[key]} {bound}, got {value}")

    def done(self) -> None:
        if self.problems:
            raise ValueError(f"{self.where}: " + "; ".join(self.problems))


def default_checkpoints(value, candidates: tuple[int, ...], last: int) -> tuple[int, ...]:
    """Checkpoints as given (sorted, unique), or the default ones that fit a run of `last` steps; the last
    step is always added by the caller."""
    if value is None:
        return tuple(c for c in candidates if c <= last)
    return tuple(sorted(set(int(c) for c in value)))


def _lookup(base: dict | None, name: str):
    """base["pretrain"]["steps"] for "pretrain.steps"; MISSING when absent."""
    for part in name.split(".")[:-1]:
        base = (base or {}).get(part)
    return (base or {}).get(name.split(".")[-1], MISSING)


def config_from_args(cls, args: argparse.Namespace, prefix: str = "", base: dict | None = None, **fixed):
    """Build `cls` from its defaults, then `base` (a preset's overrides: flat names, nested configs that are not
    flattened as dicts), then the flags given on the command line, then `fixed` (values the program sets)."""
    def take(leaf: Leaf):
        name = leaf.name[len(prefix):]
        if name in fixed:
            return fixed[name]
        if leaf.skipped:
            return MISSING
        given = getattr(args, leaf.name, None)
        return given if given is not None else _lookup(base, name)

    return build(cls, take, prefix=prefix)


def setting_names(cls) -> list[str]:
    """Every setting a config accepts by name (flattened configs' settings included; those set by the program or
    by an enclosing config are left out)."""
    return [leaf.name for leaf in leaves(cls, dotted=False) if not leaf.skipped]


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
    a sweep spec; an unknown name or a value of the wrong type is a ValueError naming it. A retired setting is
    read as setting_history.py says: dropped at the value today's code runs, refused at another."""
    given = read_as_today({k.replace("-", "_"): v for k, v in settings.items()}, where)
    known = set(setting_names(cls))
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"{where}: unknown setting {', '.join(map(repr, unknown))}; known settings are "
                         f"{', '.join(sorted(known))}")

    def take(leaf: Leaf):
        if leaf.name in fixed:
            return fixed[leaf.name]
        if leaf.skipped or leaf.name not in given:
            return MISSING
        return _coerce(leaf.name, given[leaf.name], leaf.hint, where)

    try:
        return build(cls, take, dotted=False)
    except TypeError as err:  # a required field left out
        raise ValueError(f"{where}: {err}") from None
