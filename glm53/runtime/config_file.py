"""Settings from a file: `--config FILE` on `glm53 pretrain`, `rl`, `run` and `eval`, and `--print-config`, which
prints the resolved settings as TOML that `--config` reads back to the same config.

A config file uses the flags' names (the dataclass field names, `-` or `_`). A nested config whose flags take a
prefix (`glm53 run`'s --pretrain.X and --rl.X) is a TOML table, `[pretrain]`, or dotted keys, `pretrain.lr = 1e-3`;
a flattened config's settings keep their flat names (`dim`, `dev_samples`), and a table named after its field (a
run folder's `model`) is read as well. Values come from the dataclass defaults, then the suite or preset, then the
file, then the flags given on the command line. An unknown key or a value of the wrong type is one ValueError
naming the key and the file, raised before anything is written.

A run's recorded settings are read the same way, so a run replays from its record: a run folder's run.json (or
the folder itself), a pretraining receipt's `run`, an RL receipt's `settings`, a run receipt's `config`. A replay
is a new run: the recorded `out` and `resume` are not taken (a new --out must be given), nor the values the program
itself set (a stage's folder inside a run, a sweep's tracker names). A record older than some settings is read as
setting_history.py says: one added since at the value its run ran, a retired one at today's value or refused.

Simplifies: TOML is written by a small emitter for the value types configs hold (str, int, float, bool, lists,
tables; None leaves the key out), not by a TOML library; files are read with the standard library's tomllib, as
sweep specs are.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import tomllib
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Callable

from .composition import MISSING, leaves, stem_of, type_hints
from .setting_history import added_value, read_as_today
from .settings import _coerce, _lookup, config_from_args  # the sweep specs' checks and the flags' precedence

RUN_SETTINGS_FILE = "run.json"  # a run folder's recorded settings (checkpoints/names.py RUN_CONFIG_NAME)
RECORD_SECTIONS = ("run", "settings", "config")  # the settings in a pretraining, an RL and a run receipt
NOT_REPLAYED = ("out", "resume")  # a replay writes a new folder, from its start


def add_config_file_flags(parser) -> None:
    """--config and --print-config on a command whose other flags come from a config; its required flags may then
    come from the file, so they are checked once the settings are resolved (config_from_command)."""
    parser.add_argument("--config", dest="config_file", metavar="FILE",
                        help="settings from a TOML file (the flags' names; flags given override it), or a run's "
                             "run.json or receipt to replay it (give a new --out)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved settings as TOML (a file --config reads) and exit without running")
    for action in parser._actions:
        if action.required and action.option_strings:
            action.required = False
            action.help = f"{action.help} (required: on the command line or in --config)"


def config_from_command(cls, args, preset: Callable[[Callable], dict] | None = None, **fixed):
    """`cls` from its defaults, then `preset(given)` (a suite's or preset's settings, in config_from_args' `base`
    form; `given(name)`: the value a flag or the file gives, else None), then --config FILE, then the flags given.
    With --print-config it prints the settings as TOML and returns None. A class with `inherited_settings(value)`
    names the nested settings it sets itself and no flag reaches ({"rl.suite": ...}), from `value(name)`, its own
    setting as the flags, the file or the preset give it (None if none does), so that its nested configs are checked
    with them as they are built."""
    path = getattr(args, "config_file", None)
    from_file = file_settings(cls, path, getattr(args, "command", None)) if path else {}

    def given(name: str):
        flag = getattr(args, name, None)
        found = flag if flag is not None else _lookup(from_file, name)
        return None if found is MISSING else found

    printing = getattr(args, "print_config", False)
    if not printing:
        _require(cls, given, path, getattr(args, "command", None))
    base = merged(preset(given) if preset else {}, from_file)
    if hasattr(cls, "inherited_settings"):
        def value(name: str):
            found = given(name)
            found = _lookup(base, name) if found is None else found
            return None if found is MISSING else found
        fixed = {**cls.inherited_settings(value), **fixed}
    try:
        cfg = config_from_args(cls, args, base=base, **fixed)
    except ValueError as err:
        raise ValueError(f"{err} (with --config {path})" if path else str(err)) from None
    if printing:
        print(config_toml(cfg, getattr(args, "command", None)), end="")
        return None
    if hasattr(args, "out"):
        args.out = cfg.out  # where cli.main's Ctrl-C message looks for the run's checkpoints
    return cfg


def _require(cls, given, path, command: str | None) -> None:
    """A required setting left at its placeholder default by the flags and the file is a ValueError."""
    missing = [leaf.name for leaf in required(cls) if given(leaf.name) in (None, leaf.default)]
    if not missing:
        return
    one = len(missing) == 1
    where = f"in --config {path}" if path else "in a --config file"
    if path and "out" in missing and is_record(path):
        where += " (a recorded run's out is not taken: a replay writes a new --out)"
    raise ValueError(f"{' and '.join('--' + n.replace('_', '-') for n in missing)} {'is' if one else 'are'} "
                     f"required: give {'it' if one else 'them'} on the command line or {where}"
                     + (f" (see glm53 {command} --help)" if command else ""))


def required(cls) -> list:
    """The settings a command needs although their dataclass gives a placeholder default (out, init, checkpoint)."""
    return [leaf for leaf in leaves(cls) if not leaf.skipped
            and (leaf.default is MISSING or leaf.field.metadata.get("required"))]


def merged(base: dict, over: dict) -> dict:
    """`base` with `over` on top, nested tables merged key by key (a preset's [pretrain] under a file's)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


# ---------------------------------------------------------------- reading

def read_config_file(path) -> tuple[dict, bool]:
    """(the settings a file holds as written, whether it is a run's record): TOML, or JSON (run.json, a receipt's
    settings section); a folder means its run.json."""
    p = Path(path) / RUN_SETTINGS_FILE if Path(path).is_dir() else Path(path)
    if not p.is_file():
        raise ValueError(f"--config {path}: no such file (give a TOML file, a run's run.json or receipt, or a run "
                         f"folder)")
    text = p.read_text(encoding="utf-8")
    if is_record(p):
        try:
            raw = json.loads(text)
        except ValueError as err:
            raise ValueError(f"--config {path} is not valid JSON: {err}") from None
        if not isinstance(raw, dict):
            raise ValueError(f"--config {path} holds no settings (expected a JSON object such as a run's run.json)")
        return next((raw[k] for k in RECORD_SECTIONS if isinstance(raw.get(k), dict)), raw), True
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"--config {path} is not valid TOML: {err}") from None
    if not raw:  # an empty file (or comments alone) would run the defaults as if it had been read
        raise ValueError(f"--config {path} holds no settings (an empty TOML file changes nothing); give a file of "
                         "settings, such as the command's --print-config writes, or leave --config out")
    return raw, False


def run_kind(settings: dict) -> str:
    """Which command's run recorded these settings, by a setting only it has."""
    for key, kind in (("rl_start", "a main job (glm53 run)"), ("group_size", "an RL run (glm53 rl)"),
                      ("sequence_length", "a pretraining run (glm53 pretrain)")):
        if key in settings:
            return kind
    return "another kind of run"


def is_record(path) -> bool:
    """Whether --config names a run's record (JSON, or a run folder) rather than a TOML file of settings."""
    return Path(path).is_dir() or Path(path).suffix == ".json"


def tables(cls, table: str = "", prefix: str = "") -> dict[str, str]:
    """{a table a file may hold: the prefix of its settings' flat names}: "pretrain" -> "pretrain.", a flattened
    config's field -> its stem ("model" -> "", RL's "dev" -> "dev_")."""
    hints, found = type_hints(cls), {}
    for f in fields(cls):
        if not is_dataclass(hints[f.name]):
            continue
        stem = stem_of(f.metadata)
        name, inner = table + f.name, prefix + (f"{f.name}." if stem is None else stem)
        found[name] = inner
        found.update(tables(hints[f.name], name + ".", inner))
    return found


def flat_settings(raw: dict, known_tables: dict[str, str], where: str, table: str = "", prefix: str = "") -> dict:
    """The file's settings by their flat names ("pretrain.lr", "dim"), tables walked."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        key = key.replace("-", "_")
        name = f"{table}.{key}" if table else key
        if isinstance(value, dict):
            if name not in known_tables:
                raise ValueError(f"{where}: [{name}] is not a table of settings; tables here are "
                                 f"{', '.join(sorted(known_tables)) or 'none'}")
            inner = flat_settings(value, known_tables, where, name, known_tables[name])
        else:
            inner = {prefix + key: value}
        twice = sorted(set(inner) & set(out))
        if twice:
            raise ValueError(f"{where}: {', '.join(twice)} given twice (two spellings, or its flat name and a table)")
        out.update(inner)
    return out


def file_settings(cls, path, command: str | None = None) -> dict:
    """The settings --config FILE gives `cls`, checked and typed, in config_from_args' `base` form (flat names, a
    nested config with a flag prefix as a dict). From a run's record, what a replay must not take is left out, and
    what it lacks of the settings added since it was written is the value its run ran at. A retired setting, in a
    record or a file, is dropped at the value today's code runs and refused at another (setting_history.py)."""
    raw, recorded = read_config_file(path)
    where = str(path)
    raw = read_as_today(raw, f"--config {path}")
    wanted, held = run_kind({leaf.name: None for leaf in leaves(cls)}), run_kind(raw)
    if recorded and "another" not in wanted and held != wanted:  # not its first unknown key: the kind of record
        raise ValueError(f"--config {path} records {held}, not {wanted}; replay it with the command that made it, "
                         f"or give {wanted.split(' (')[0]}'s run.json or receipt, or a TOML file")
    flat = flat_settings(raw, tables(cls), where)
    # a name two nested configs share has one flag at most (eval's precision is its evaluation's, not its runtime's)
    every = {leaf.name: leaf for leaf in sorted(leaves(cls), key=lambda leaf: not leaf.skipped)}
    if recorded:  # set by the program (or a new run's own: out, resume), so not the settings a replay takes
        flat = {k: v for k, v in flat.items() if k not in NOT_REPLAYED and not (k in every and every[k].skipped)}
        flat.update(added_since(flat, every))
    for name in flat:
        leaf = every.get(name)
        if leaf is not None and leaf.skipped:
            raise ValueError(f"{where}: {name} is set by the command itself, not by a config file; leave it out")
        if leaf is None:
            known = [n for n, leaf in every.items() if not leaf.skipped]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listing = f"`glm53 {command} --print-config` prints" if command else "--help lists"
            raise ValueError(f"{where}: unknown setting {name!r}{hint}; {listing} every setting")
    values: dict[str, Any] = {}
    for name, value in flat.items():
        *path_parts, key = name.split(".")
        table = values
        for part in path_parts:
            table = table.setdefault(part, {})
        table[key] = _coerce(name, value, every[name].hint, where)
    return values


def added_since(flat: dict, every: dict) -> dict:
    """{flat name: the value a record's run ran at} of the settings `every` (the command's leaves) has that a run's
    record lacks because they were added after it was written (setting_history.py)."""
    found = {}
    for name, leaf in every.items():
        prefix, _, short = name.rpartition(".")
        table = {k.removeprefix(prefix + "."): v for k, v in flat.items() if not prefix or k.startswith(prefix + ".")}
        added, value = added_value(short, table)
        if added and name not in flat and not leaf.skipped and name not in NOT_REPLAYED:
            found[name] = value
    return found


# ---------------------------------------------------------------- writing

def settings_of(cfg) -> dict:
    """`cfg` as a config file holds it: every setting that has a flag, by its flat name, a nested config with a
    flag prefix as a table; tuples as lists, None left out (the settings that may be None default to it)."""
    out: dict[str, Any] = {}
    for leaf in leaves(type(cfg), cfg):
        if leaf.skipped or leaf.default is None:
            continue
        *path_parts, key = leaf.name.split(".")
        table = out
        for part in path_parts:
            table = table.setdefault(part, {})
        table[key] = list(leaf.default) if isinstance(leaf.default, tuple) else leaf.default
    return out


def config_toml(cfg, command: str | None = None) -> str:
    """--print-config's text: the settings as TOML, a required setting still at its placeholder as a comment."""
    settings = settings_of(cfg)
    name = f"glm53 {command}" if command else "glm53 <command>"
    lines = [f"# {name} settings, resolved (defaults < suite or preset < --config < flags given);",
             f"# run them with: {name} --config FILE"]
    for leaf in required(type(cfg)):
        if "." not in leaf.name and settings.get(leaf.name) == leaf.default:
            settings.pop(leaf.name, None)
            lines.append(f"# {leaf.name} = ...  (required: add it here or give --{leaf.name.replace('_', '-')})")
    return "\n".join(lines) + "\n" + to_toml(settings)


BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def to_toml(settings: dict, table: str = "") -> str:
    """A TOML document of `settings`: its plain values, then each dict as a [table] (a dict inside one as
    [table.sub]); None values are left out."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in settings.items()
             if v is not None and not isinstance(v, dict)]
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, value in settings.items():
        if isinstance(value, dict):
            name = f"{table}.{toml_key(key)}" if table else toml_key(key)
            text += f"{chr(10) if text else ''}[{name}]\n" + to_toml(value, name)
    return text


def toml_key(key: str) -> str:
    return key if BARE_KEY.fullmatch(key) else toml_string(key)


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # repr is the shortest text that reads back to the same float
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        if any(v is None for v in value):
            raise ValueError(f"TOML arrays cannot hold None: {value!r}")
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__} {value!r}")


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped, other characters as they are."""
    out = []
    for ch in text:
        if 0xD800 <= ord(ch) <= 0xDFFF:
            raise ValueError(f"{text!r} holds a lone surrogate, which TOML cannot write")
        out.append(ESCAPES.get(ch) or (f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch))
    return '"' + "".join(out) + '"'
