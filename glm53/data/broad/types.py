"""The five value types of the broad suite, the type variable `T`, and what a value's type is.

Types are plain strings: "int", "str", "bool", "list[int]", "list[str]". A primitive may declare `T` (one
primitive, several signatures) and use "item(T)", the element type of `T` (a string's items are strings).
Simplification: no nested lists, no dicts, no None; every function returns one of these five types.
"""

from __future__ import annotations

TYPES = ("int", "str", "bool", "list[int]", "list[str]")
CONTAINERS = ("str", "list[int]", "list[str]")
ITEM = {"str": "str", "list[int]": "int", "list[str]": "str"}
# nouns for the {item}/{items} placeholders of phrasings, by the type that holds the items
ITEM_NOUNS = {"str": ("character", "characters"), "list[int]": ("number", "numbers"),
              "list[str]": ("string", "strings")}


def resolve(spec: str, binding: str | None) -> str:
    """'T' / 'item(T)' / a concrete type -> a concrete type, with T bound to `binding`."""
    if spec == "T":
        if binding is None:
            raise ValueError("type T used but the primitive declares no `types = { T = [...] }`")
        return binding
    if spec == "item(T)":
        if binding not in ITEM:
            raise ValueError(f"item(T) needs T to be one of {list(ITEM)}, got {binding!r}")
        return ITEM[binding]
    if spec not in TYPES:
        raise ValueError(f"unknown type {spec!r}; types are {', '.join(TYPES)}, T and item(T)")
    return spec


def type_of(value) -> str | None:
    """The broad type of a value, or None when it has none (a tuple, a float, a mixed list...)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        if all(type(v) is int for v in value):
            return "list[int]"  # the empty list counts as list[int]; has_type accepts it for list[str] too
        if all(type(v) is str for v in value):
            return "list[str]"
    return None


def has_type(value, type_name: str) -> bool:
    found = type_of(value)
    return found == type_name or (value == [] and type_name in ("list[int]", "list[str]"))


def item_nouns(type_name: str) -> tuple[str, str]:
    return ITEM_NOUNS.get(type_name, ("item", "items"))
