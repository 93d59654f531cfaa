"""A user's own primitives and phrasings, merged into the registry.

The file is TOML (read with tomllib; a Python file is not accepted). Its templates are code, judged as a model's
program is: each must pass the verifier's static check at the `python` level (no imports, no dunder names, only
allow-listed attributes...), then runs on its examples in the verifier's sandbox; only then does it run in this
process, on generated inputs, with only the builtins a template may name (registry.py). Not bounded in this
process: the time a template that passed those checks takes on a generated input. Bounded: the values it gives
(primitive.modest: ints to 10,000, strings and lists to 1,000 items; a larger one rules the input out), so a
built-in primitive after it (count_up, repeat) allocates no more than the built-in grammar can make it. It may hold:

    [[primitive]]          a new primitive, in the built-in format (registry.py)
    [[phrasing]]           a phrasing for a primitive of the registry or of this file:
    primitive = "add"
    text = "{a} and {b} added together"
    held_out = false       # true: only the `phrase` split uses it

Each file is checked before use and refused with one line naming the file and the problem: not TOML, an
unknown key, a bad type or template, an example the expression (or its block form) does not reproduce, or a
primitive that never yields a usable task rooted at it (depth 1 or 2), in either form, whose reference body
passes the verifier's static check at the `python` level and its own cases.
glm53/data/broad/examples/extra_primitives.toml is a worked example.
"""

from __future__ import annotations

import os
import random
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

from .cases import Degenerate, select_cases
from .task_draw import check_by_exec
from .identifiers import draw_arg_names
from .registry import Registry, RegistryError, builtin_registry, check_phrasings, parse_primitive, read_toml
from .render import write_body
from .trees import Redraw, draw_program

EXAMPLE = Path(__file__).with_name("examples") / "extra_primitives.toml"
SELF_CHECK_DRAWS = 60


def self_check(prim, registry: Registry, where: str) -> None:
    """Refuse `prim` unless it yields a usable depth-1 task whose body passes its cases, in each form."""
    forms = ["expr"] + (["block"] if prim.block else [])
    reasons: dict[str, int] = {}
    for attempt in range(SELF_CHECK_DRAWS):
        form = forms[attempt % len(forms)]
        rng = random.Random(f"broad-self-check:{prim.name}:{attempt}")
        try:
            depth = 1 + attempt // len(forms) % 2  # not(flag) alone has only two inputs: also try depth 2
            program = draw_program(rng, registry, depth, lambda p, c: True, root_sig=rng.choice(prim.signatures),
                                   block_rate=1.0 if form == "block" else 0.0)
            cases = select_cases(program, rng)
        except (Redraw, Degenerate) as err:
            reasons[str(err)] = reasons.get(str(err), 0) + 1
            continue
        names = draw_arg_names(rng, program.arg_types)
        source = f"def f({', '.join(names)}):" + write_body(program, names, rng)
        problem = check_by_exec(source, "f", cases)  # the verifier's static check, then restricted exec
        if problem:
            raise RegistryError(f"{where}: the reference body ({form}) {problem}: {source.splitlines()[1:]}")
        forms.remove(form)
        if not forms:
            return
    common = max(reasons, key=reasons.get) if reasons else "no draw"
    raise RegistryError(f"{where}: no usable task of depth 1 or 2 in {SELF_CHECK_DRAWS} draws (most often: {common})")


def _phrasing(obj, registry_prims: dict, origin: str):
    where = f"{origin}: a phrasing"
    if not isinstance(obj, dict) or set(obj) - {"primitive", "text", "held_out"} or "text" not in obj \
            or "primitive" not in obj:
        raise RegistryError(f"{where}: needs keys primitive and text (and optional held_out), nothing else")
    prim = registry_prims.get(obj["primitive"])
    if prim is None:
        raise RegistryError(f"{where}: unknown primitive {obj['primitive']!r}")
    text, held = obj["text"], obj.get("held_out", False)
    if not isinstance(text, str) or not text.strip() or not isinstance(held, bool):
        raise RegistryError(f"{where}: text must be a non-empty string and held_out true or false")
    check_phrasings(prim, [text], f"{origin}: phrasing for {prim.name!r}")
    return prim.name, (replace(prim, held_out=prim.held_out + (text,)) if held
                       else replace(prim, phrasings=prim.phrasings + (text,)))


def merge_file(registry: Registry, path) -> Registry:
    path = Path(path)
    data = read_toml(path)
    unknown = sorted(set(data) - {"primitive", "phrasing"})
    if unknown:
        raise RegistryError(f"{path}: unknown top-level keys {unknown}; use [[primitive]] and [[phrasing]]")
    for key in ("primitive", "phrasing"):
        if not isinstance(data.get(key, []), list):
            raise RegistryError(f"{path}: `{key}` must be an array of tables ([[{key}]])")
    new = [parse_primitive(t, str(path)) for t in data.get("primitive", [])]
    prims = {p.name: p for p in registry.primitives}
    for p in new:
        if p.name in prims:
            raise RegistryError(f"{path}: primitive {p.name!r} is already defined ({prims[p.name].origin})")
        prims[p.name] = p
    for obj in data.get("phrasing", []):
        name, updated = _phrasing(obj, prims, str(path))
        prims[name] = updated
    merged = Registry(prims.values(), f"{registry.label} + {path.name}")
    for p in new:
        self_check(merged.by_name[p.name], merged, f"{path}: primitive {p.name!r}")
    return merged


@lru_cache(maxsize=8)
def _load(files: tuple[tuple[str, float], ...]) -> Registry:
    registry = builtin_registry()
    for path, _ in files:
        registry = merge_file(registry, path)
    return registry


def load_registry(extra=None) -> Registry:
    """The built-in registry, merged with the file or files in `extra` (paths), in order."""
    if extra is None:
        return builtin_registry()
    paths = [extra] if isinstance(extra, (str, os.PathLike)) else list(extra)
    files = []
    for p in paths:
        p = Path(p).resolve()
        if not p.is_file():
            raise RegistryError(f"{p}: no such file")
        files.append((str(p), p.stat().st_mtime))
    return _load(tuple(files))
