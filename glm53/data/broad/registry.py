"""The registry as data: primitives are read from TOML files (the built-in ones in primitives/*.toml, a user's
own through extension.py) and checked before use. Every problem is reported as one line naming the file and
the primitive. A primitive table:

    [[primitive]]
    name = "add"                                # unique, lower case
    args = { a = "int", b = "int" }             # 1 to 3 slots; types int, str, bool, list[int], list[str], T
    result = "int"
    expr = "{a} + {b}"                          # a Python expression over the slots
    phrasings = ["the sum of {a} and {b}", "{a} plus {b}", "{a} added to {b}"]
    held_out = ["the total of {a} and {b}"]     # phrasings only the `phrase` split uses
    examples = [[[2, 3], 5], [[-4, 1], -3]]     # [args, expected]: the expression must reproduce them
    # optional: types = { T = ["list[int]", "str"] }, consts = { k = [2, 3] }, requires = "len({xs}) > 0",
    #           block = "...statements setting {out}...", out = ["total"], words = ["sum"]

A phrasing is a noun phrase (a clause for a bool result: "{a} is even"); it names every slot, and may say
{item}/{items} for the nouns of the first container argument ("characters", "numbers", "strings").
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import string
import tomllib
from dataclasses import replace
from functools import cached_property, lru_cache
from pathlib import Path

from .primitive import LOOP_VARS, Primitive
from .types import CONTAINERS, TYPES, has_type, item_nouns, resolve

BUILTIN_DIR = Path(__file__).with_name("primitives")
KEYS = {"name", "args", "result", "expr", "phrasings", "held_out", "types", "block", "consts", "requires",
        "words", "out", "examples"}
REQUIRED = ("name", "args", "result", "expr", "phrasings", "examples")
# builtins a template may call: ordinary Python at the verifier's `python` language level
TEMPLATE_BUILTINS = frozenset({"abs", "all", "any", "bool", "divmod", "enumerate", "int", "len", "list", "max",
                               "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip"})
MIN_PHRASINGS = 3


class RegistryError(ValueError):
    """A primitive file or table that cannot be used; the message is one line."""


def _fields(template: str, where: str) -> list[str]:
    try:
        return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as err:
        raise RegistryError(f"{where}: bad template {template!r} ({err})") from None


def _check_code(prim: Primitive, template: str, mode: str, where: str) -> None:
    allowed = set(prim.slots) | set(LOOP_VARS) | ({"out"} if mode == "exec" else set())
    unknown = sorted(set(_fields(template, where)) - allowed)
    if unknown:
        raise RegistryError(f"{where}: unknown placeholders {unknown} in {template!r}")
    code = prim._internal(template)
    try:
        tree = ast.parse(code.strip("\n") if mode == "exec" else code, mode=mode)
    except SyntaxError as err:
        raise RegistryError(f"{where}: {template!r} is not Python ({err.msg})") from None
    bound = set(prim.slots) | {f"_{v}" for v in LOOP_VARS} | {"_out"}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Lambda, ast.FunctionDef, ast.ClassDef, ast.Global)):
            raise RegistryError(f"{where}: {type(node).__name__} is not allowed in a template")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise RegistryError(f"{where}: attribute {node.attr!r} is not allowed")
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound \
                and node.id not in TEMPLATE_BUILTINS:
            raise RegistryError(f"{where}: name {node.id!r} is neither a slot nor an allowed builtin "
                                f"({', '.join(sorted(TEMPLATE_BUILTINS))})")


def _str_list(obj: dict, key: str, where: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RegistryError(f"{where}: {key!r} must be a list of non-empty strings")
    return tuple(value)


def parse_primitive(obj, origin: str) -> Primitive:
    """One [[primitive]] table -> a checked Primitive (examples reproduced, phrasings complete)."""
    name = obj.get("name") if isinstance(obj, dict) else None
    where = f"{origin}: primitive {name!r}" if isinstance(name, str) else f"{origin}: a primitive"
    if not isinstance(obj, dict):
        raise RegistryError(f"{where}: expected a table")
    missing = [k for k in REQUIRED if k not in obj]
    if missing:
        raise RegistryError(f"{where}: missing keys {missing}")
    unknown = sorted(set(obj) - KEYS)
    if unknown:
        raise RegistryError(f"{where}: unknown keys {unknown}; known keys: {sorted(KEYS)}")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name in ("frame", "style"):
        raise RegistryError(f"{where}: name must be lower case letters, digits and _ (and not frame or style)")
    args = obj["args"]
    if not isinstance(args, dict) or not 1 <= len(args) <= 3:
        raise RegistryError(f"{where}: args must be a table of 1 to 3 slots, e.g. {{ a = \"int\" }}")
    for slot, spec in args.items():
        if not slot.isidentifier() or keyword.iskeyword(slot) or hasattr(builtins, slot) \
                or slot in LOOP_VARS or slot in ("out", "item", "items") or slot.startswith("_"):
            raise RegistryError(f"{where}: slot name {slot!r} is not allowed (an identifier, not a builtin, "
                                f"not v, w, i, out, item or items)")
        if not isinstance(spec, str):
            raise RegistryError(f"{where}: the type of slot {slot!r} must be a string")
    types = obj.get("types", {})
    if not isinstance(types, dict) or set(types) - {"T"}:
        raise RegistryError(f"{where}: types may only declare T, e.g. types = {{ T = [\"str\", \"list[int]\"] }}")
    bindings = tuple(types.get("T", [None])) or (None,)
    if any(b is not None and b not in TYPES for b in bindings):
        raise RegistryError(f"{where}: T must range over {list(TYPES)}")
    for key in ("expr", "block", "requires"):
        if key in obj and not isinstance(obj[key], str):
            raise RegistryError(f"{where}: {key!r} must be a string")
    for key in ("words", "out"):
        if not all(re.fullmatch(r"[a-z][a-z0-9_]*", w) for w in _str_list(obj, key, where)):
            raise RegistryError(f"{where}: {key!r} must be lower-case identifiers (a-z, 0-9, _)")
    prim = Primitive(name=name, args=tuple(args.items()), result=obj["result"], expr=obj["expr"],
                     phrasings=_str_list(obj, "phrasings", where), held_out=_str_list(obj, "held_out", where),
                     bindings=bindings, block=obj.get("block"), requires=obj.get("requires"),
                     words=_str_list(obj, "words", where) or tuple(name.split("_")),
                     out=_str_list(obj, "out", where) or ("result",), origin=origin)
    try:
        prim.signatures  # resolves every type
    except ValueError as err:
        raise RegistryError(f"{where}: {err}") from None
    _check_code(prim, prim.expr, "eval", where)
    if prim.block is not None:
        _check_code(prim, prim.block, "exec", where)
        if "{out}" not in prim.block:
            raise RegistryError(f"{where}: the block form must set {{out}}")
    if prim.requires is not None:
        _check_code(prim, prim.requires, "eval", where)
    missing_slots = [s for s in prim.slots if "{" + s + "}" not in prim.expr]
    if missing_slots:
        raise RegistryError(f"{where}: expr does not use slots {missing_slots}")
    prim = replace(prim, consts=_consts(obj, prim, where))
    check_phrasings(prim, prim.phrasings + prim.held_out, where)
    if len(prim.phrasings) < 1 or len(prim.phrasings) + len(prim.held_out) < MIN_PHRASINGS:
        raise RegistryError(f"{where}: needs at least {MIN_PHRASINGS} phrasings, at least one not held out")
    return replace(prim, examples=_examples(obj["examples"], prim, where))


def check_phrasings(prim: Primitive, phrasings, where: str) -> None:
    for text in phrasings:
        fields = _fields(text, where)
        unknown = sorted(set(fields) - set(prim.slots) - {"item", "items"})
        absent = [s for s in prim.slots if s not in fields]
        if unknown or absent:
            raise RegistryError(f"{where}: phrasing {text!r} must name every slot {list(prim.slots)} "
                                f"and nothing else (unknown {unknown}, absent {absent})")


def _consts(obj: dict, prim: Primitive, where: str) -> dict:
    consts = obj.get("consts", {})
    if not isinstance(consts, dict):
        raise RegistryError(f"{where}: consts must be a table slot -> list of literals")
    out = {}
    for slot, values in consts.items():
        if slot not in prim.slots or not isinstance(values, list) or not values:
            raise RegistryError(f"{where}: consts.{slot} must be a non-empty list for a declared slot")
        for sig in prim.signatures:
            t = sig.arg_types[prim.slots.index(slot)]
            if not all(has_type(v, t) for v in values):
                raise RegistryError(f"{where}: consts.{slot} must hold values of type {t}")
        out[slot] = tuple(values)
    return out


def _examples(examples, prim: Primitive, where: str) -> tuple:
    if not isinstance(examples, list) or not examples:
        raise RegistryError(f"{where}: examples must be a non-empty list of [args, expected]")
    checked = []
    for n, example in enumerate(examples):
        if not (isinstance(example, list) and len(example) == 2 and isinstance(example[0], list)
                and len(example[0]) == len(prim.slots)):
            raise RegistryError(f"{where}: example {n} must be [[{len(prim.slots)} args], expected]")
        args, expected = tuple(example[0]), example[1]
        sig = next((s for s in prim.signatures if all(has_type(a, t) for a, t in zip(args, s.arg_types))), None)
        if sig is None or not has_type(expected, sig.result):
            raise RegistryError(f"{where}: example {n} does not fit any signature of the primitive")
        for form, fn in (("expr", prim.function), ("block", prim.block_function)):
            if fn is None:
                continue
            try:
                got = fn(*args)
            except Exception as err:  # the reference itself fails: refuse the primitive
                raise RegistryError(f"{where}: {form} raises {type(err).__name__} on example {n}") from None
            if type(got) is not type(expected) or got != expected:
                raise RegistryError(f"{where}: {form} returns {got!r} on example {n}, expected {expected!r}")
        checked.append((args, expected))
    return tuple(checked)


def read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"{path}: no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise RegistryError(f"{path}: not valid TOML ({err})") from None


def read_primitives(path: Path) -> list[Primitive]:
    data = read_toml(path)
    tables = data.get("primitive", [])
    if not isinstance(tables, list):
        raise RegistryError(f"{path}: `primitive` must be an array of tables ([[primitive]])")
    return [parse_primitive(t, Path(path).name) for t in tables]


class Registry:
    """Primitives by name and the signatures producing each type. Immutable; hashed by identity."""

    def __init__(self, primitives, label: str = "built-in"):
        self.primitives = tuple(primitives)
        self.label = label
        names = [p.name for p in self.primitives]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise RegistryError(f"{label}: primitive names defined twice: {duplicates}")
        self.by_name = {p.name: p for p in self.primitives}

    @cached_property
    def signatures(self):
        return tuple(s for p in self.primitives for s in p.signatures)

    @cached_property
    def producers(self) -> dict:
        """type -> signatures whose result is that type."""
        return {t: tuple(s for s in self.signatures if s.result == t) for t in TYPES}

    @cached_property
    def held_out_phrasing_ids(self) -> frozenset[str]:
        return frozenset(pid for p in self.primitives for pid, _, held in p.phrasing_ids() if held)

    def nouns(self, sig) -> tuple[str, str]:
        container = next((t for t in sig.arg_types if t in CONTAINERS), None)
        return item_nouns(container) if container else ("item", "items")


@lru_cache(maxsize=1)
def builtin_registry() -> Registry:
    prims = [p for path in sorted(BUILTIN_DIR.glob("*.toml")) for p in read_primitives(path)]
    return Registry(prims, "built-in")


def resolve_registry(registry: Registry | None) -> Registry:
    return registry if registry is not None else builtin_registry()


__all__ = ["Registry", "RegistryError", "builtin_registry", "parse_primitive", "read_primitives", "resolve",
           "resolve_registry", "check_phrasings", "read_toml"]
