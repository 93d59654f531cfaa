"""Values on the wire between the sandbox's processes: tagged JSON, so types survive the trip, and type-strict
equality. Standard library only (the sandbox worker imports it under `python -I -S`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

SUPPORTED_TYPES = ("int", "bool", "float", "str", "None", "list", "tuple", "dict")


def encode(value, depth=0, strict=False):
    """Tagged JSON so that types survive the trip: 1, True, 1.0 and "1" stay distinct. A value of another type
    becomes an "unsupported" tag that equals nothing, or with `strict` (for the caller's own cases) a ValueError."""
    if depth > 50:
        raise ValueError("nested too deeply")
    t = type(value)
    if t is bool:
        return ["bool", value]
    if t is int:
        return ["int", hex(value)]  # hex is not subject to the int/str digit limit
    if t is float:
        return ["float", repr(value)]
    if t is str:
        return ["str", value]
    if value is None:
        return ["none"]
    if t is list or t is tuple:
        return [t.__name__, [encode(v, depth + 1, strict) for v in value]]
    if t is dict:
        return ["dict", [[encode(k, depth + 1, strict), encode(v, depth + 1, strict)] for k, v in value.items()]]
    if strict:
        raise ValueError(f"a value of type {t.__name__} cannot be judged (supported: {', '.join(SUPPORTED_TYPES)})")
    return ["unsupported", t.__name__]


def decode(tagged):
    tag = tagged[0]
    if tag == "bool":
        return bool(tagged[1])
    if tag == "int":
        return int(tagged[1], 16)
    if tag == "float":
        return float(tagged[1])
    if tag == "str":
        return tagged[1]
    if tag == "none":
        return None
    if tag == "list":
        return [decode(v) for v in tagged[1]]
    if tag == "tuple":
        return tuple(decode(v) for v in tagged[1])
    if tag == "dict":
        return {decode(k): decode(v) for k, v in tagged[1]}
    raise ValueError(f"cannot decode tag {tag!r}")


def same_value(actual, expected) -> bool:
    """Type-strict equality, recursively through lists, tuples and dicts (keys included: {True: 1} != {1: 1}).
    Floats compare with ==, so -0.0 passes for 0.0 (a zero's sign is not part of what a task asks); a NaN never
    equals anything, which is why the caller refuses NaN as an expected value when it builds a job."""
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(same_value(a, e) for a, e in zip(actual, expected))
    if isinstance(expected, dict):
        if len(actual) != len(expected):
            return False
        stored = {key: key for key in expected}  # the expected dict's own key object for each equal key
        for key, value in actual.items():
            if key not in stored or not same_value(key, stored[key]):
                return False
            if not same_value(value, expected[stored[key]]):
                return False
        return True
    return actual == expected


def encode_cases(cases: Sequence, where: str = "item") -> list:
    """Cases in the sandbox's tagged form; a value it cannot represent, or a NaN expected value (which nothing
    equals), is a ValueError naming the case, raised before any program runs."""
    encoded = []
    for k, (args, expected) in enumerate(cases):
        try:
            encoded_args = [encode(a, strict=True) for a in args]
        except ValueError as err:
            raise ValueError(f"{where}: case {k}: an argument: {err}") from None
        if _holds_nan(expected):
            raise ValueError(f"{where}: case {k}: the expected value holds NaN, which no result can equal; "
                             "write the task to expect something else") from None
        try:
            encoded.append([encoded_args, encode(expected, strict=True)])
        except ValueError as err:
            raise ValueError(f"{where}: case {k}: the expected value: {err}") from None
    return encoded


def _holds_nan(value, depth: int = 0) -> bool:
    if type(value) is float:
        return math.isnan(value)
    if depth < 50 and type(value) in (list, tuple):
        return any(_holds_nan(v, depth + 1) for v in value)
    if depth < 50 and type(value) is dict:
        return any(_holds_nan(k, depth + 1) or _holds_nan(v, depth + 1) for k, v in value.items())
    return False
