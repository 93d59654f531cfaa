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
    examples = [[[2, 3], 5], [[-4, 1], -3]]     # [args, expected]: the expression must reproduce them (and
                                                # the block form too; requires must hold on them)
    # optional: types = { T = ["list[int]", "str"] }, consts = { k = [2, 3] }, requires = "len({xs}) > 0",
    #           block = "...statements setting {out}...", out = ["total"], words = ["sum"]

A phrasing is a noun phrase (a clause for a bool result: "{a} is even"); it names every slot, and may say
{item}/{items} for the nouns of the first container argument ("characters", "numbers", "strings").

A user's file is untrusted: its templates (expr, block, requires) must pass the verifier's static check at the
`python` level, as a model's program must, and they first run in the verifier's sandbox, on the examples, before
any of them runs in this process (then with only TEMPLATE_BUILTINS). The built-in files are trusted: checked
alike, but their examples run in this process.
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

from ...verify import verify_many
from ...verify.program import Program
from ...verify.static_check import MAX_SOURCE_BYTES, StaticCheckError, check_source
from .primitive import LOOP_VARS, TEMPLATE_BUILTINS, Primitive
from .types import CONTAINERS, TYPES, has_type, item_nouns, resolve

BUILTIN_DIR = Path(__file__).with_name("primitives")
KEYS = {"name", "args", "result", "expr", "phrasings", "held_out", "types", "block", "consts", "requires",
        "words", "out", "examples"}
REQUIRED = ("name", "args", "result", "expr", "phrasings", "examples")
MIN_PHRASINGS = 3
LANGUAGE = "python"  # the verifier's level that judges templates


class RegistryError(ValueError):
    """A primitive file or table that cannot be used; the message is one line."""


def _fields(template: str, where: str) -> list[str]:
    try:
        parsed = [(f, spec, conversion) for _, f, spec, conversion in string.Formatter().parse(template)
                  if f is not None]
    except ValueError as err:
        raise RegistryError(f"{where}: bad template {template!r} ({err})") from None
    if any(spec or conversion for _, spec, conversion in parsed):  # {a!r}, {a:>99999999}: text no check has seen
        raise RegistryError(f"{where}: a placeholder takes no conversion or format spec in {template!r}")
    return [f for f, _, _ in parsed]


def _check_code(prim: Primitive, form: str, where: str) -> None:
    """Refuse the template `form` (expr, block or requires) unless it is ordinary Python over its slots that the
    verifier's static check passes at the python level, like a model's program."""
    template, mode = getattr(prim, form), "exec" if form == "block" else "eval"
    if len(template.encode()) > MAX_SOURCE_BYTES:
        raise RegistryError(f"{where}: {form} is longer than {MAX_SOURCE_BYTES} bytes")
    allowed = set(prim.slots) | set(LOOP_VARS) | ({"out"} if mode == "exec" else set())
    unknown = sorted(set(_fields(template, where)) - allowed)
    if unknown:
        raise RegistryError(f"{where}: unknown placeholders {unknown} in {template!r}")
    code = prim._internal(template)
    try:
        tree = ast.parse(code.strip("\n") if mode == "exec" else code, mode=mode)
    except SyntaxError as err:
        raise RegistryError(f"{where}: {template!r} is not Python ({err.msg})") from None
    except (ValueError, RecursionError, MemoryError) as err:  # nested too deep for the parser
        raise RegistryError(f"{where}: {form} cannot be parsed ({type(err).__name__})") from None
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
    try:  # the rules model programs face: no dunder names, attributes only from an allow-list (no gi_frame)...
        check_source(prim.source(form), "_f", language=LANGUAGE)
    except StaticCheckError as err:
        raise RegistryError(f"{where}: {form} is refused by the verifier's static check ({err})") from None


def _str_list(obj: dict, key: str, where: str) -> tuple[str, ...]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RegistryError(f"{where}: {key!r} must be a list of non-empty strings")
    return tuple(value)


def parse_primitive(obj, origin: str, trusted: bool = False) -> Primitive:
    """One [[primitive]] table -> a checked Primitive (examples reproduced, phrasings complete). Only the
    package's own files are `trusted`: the examples of any other run in the verifier's sandbox first."""
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
    if any(keyword.iskeyword(w) for w in _str_list(obj, "out", where)):  # they name variables of the body
        raise RegistryError(f"{where}: 'out' may not hold a Python keyword")
    prim = Primitive(name=name, args=tuple(args.items()), result=obj["result"], expr=obj["expr"],
                     phrasings=_str_list(obj, "phrasings", where), held_out=_str_list(obj, "held_out", where),
                     bindings=bindings, block=obj.get("block"), requires=obj.get("requires"),
                     words=_str_list(obj, "words", where) or tuple(name.split("_")),
                     out=_str_list(obj, "out", where) or ("result",), origin=origin, bounded=not trusted)
    try:
        prim.signatures  # resolves every type
    except ValueError as err:
        raise RegistryError(f"{where}: {err}") from None
    _check_code(prim, "expr", where)
    if prim.block is not None:
        _check_code(prim, "block", where)
        if "{out}" not in prim.block:
            raise RegistryError(f"{where}: the block form must set {{out}}")
    if prim.requires is not None:
        _check_code(prim, "requires", where)
    missing_slots = [s for s in prim.slots if "{" + s + "}" not in prim.expr]
    if missing_slots:
        raise RegistryError(f"{where}: expr does not use slots {missing_slots}")
    prim = replace(prim, consts=_consts(obj, prim, where))
    check_phrasings(prim, prim.phrasings + prim.held_out, where)
    if len(prim.phrasings) < 1 or len(prim.phrasings) + len(prim.held_out) < MIN_PHRASINGS:
        raise RegistryError(f"{where}: needs at least {MIN_PHRASINGS} phrasings, at least one not held out")
    return replace(prim, examples=_examples(obj["examples"], prim, where, trusted))


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


def _examples(examples, prim: Primitive, where: str, trusted: bool) -> tuple:
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
        checked.append((args, expected))
    if not trusted:
        _examples_in_sandbox(prim, checked, where)
    for n, (args, expected) in enumerate(checked):
        for form, fn, want in (("requires", prim.precondition, True), ("expr", prim.function, expected),
                               ("block", prim.block_function, expected)):
            if fn is None:
                continue
            try:
                got = fn(*args)
            except Exception as err:  # the reference itself fails: refuse the primitive
                raise RegistryError(f"{where}: {form} raises {type(err).__name__} on example {n}") from None
            if type(got) is not type(want) or got != want:
                raise RegistryError(f"{where}: {form} returns {got!r} on example {n}, expected {want!r}")
    return tuple(checked)


def _examples_in_sandbox(prim: Primitive, examples: list, where: str) -> None:
    """Run a user's templates on their examples where a model's program runs: in the verifier's sandbox (its own
    process, CPU and memory limits, OS isolation). One that spins, exhausts memory or crashes there is refused
    before anything of the file runs in this process; a wrong value or an exception, which ended it, is then
    reported by the in-process check."""
    forms = [form for form in ("expr", "block", "requires") if getattr(prim, form) is not None]
    programs = [Program(prim.source(form), "_f", [(args, True if form == "requires" else expected)
                                                  for args, expected in examples]) for form in forms]
    for form, verdict in zip(forms, verify_many(programs, language=LANGUAGE)):
        if verdict.status not in ("passed", "failed"):
            raise RegistryError(f"{where}: {form} on the examples in the verifier's sandbox: {verdict.status} "
                                f"({verdict.message})")


def read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"{path}: no such file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise RegistryError(f"{path}: not valid TOML ({err})") from None


def read_primitives(path: Path, trusted: bool = False) -> list[Primitive]:
    data = read_toml(path)
    tables = data.get("primitive", [])
    if not isinstance(tables, list):
        raise RegistryError(f"{path}: `primitive` must be an array of tables ([[primitive]])")
    return [parse_primitive(t, Path(path).name, trusted) for t in tables]


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
    prims = [p for path in sorted(BUILTIN_DIR.glob("*.toml")) for p in read_primitives(path, trusted=True)]
    return Registry(prims, "built-in")


def resolve_registry(registry: Registry | None) -> Registry:
    return registry if registry is not None else builtin_registry()


__all__ = ["Registry", "RegistryError", "builtin_registry", "parse_primitive", "read_primitives", "resolve",
           "resolve_registry", "check_phrasings", "read_toml"]
