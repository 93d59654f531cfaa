"""Input values per type: fixed edge values, random draws, and the literal constants a program may hold.

Edge values cover what catches wrong programs (field notes): the empty string and list, zero, negatives, one
element, duplicates, mixed case and whitespace. Random strings use a small alphabet (a, b, e, x, A, B, space,
comma, dash) so that prefixes, counts and replacements have something to find. Values stay small: a case is
dropped when an input or output is longer than MAX_REPR characters (cases.py), which also keeps task files
small. Simplification: one fixed distribution per type, not per primitive; preconditions (`requires`) and
exceptions remove the inputs that do not fit a program instead.
"""

from __future__ import annotations

import random
from functools import lru_cache

EDGE = {
    "int": (0, 1, -1, 2, -3, 7, 10, -12, 25, 100),
    "str": ("", "a", "A", "abc", "Hello World", "  padded  ", "aAbB", "banana", "x y z", "Mississippi", " ",
            "a,b,c", "2024", "is-it-ok", "Eve"),
    "bool": (True, False),
    "list[int]": ([], [0], [5], [-3], [2, 2], [3, 1, 2], [-1, 0, 1], [4, -2, 4, 7], [10, 20, 30, 40, 50],
                  [1, 1, 2, 3, 5, 8]),
    "list[str]": ([], ["a"], [""], ["hi", "hi"], ["Apple", "banana", "cherry"], ["x", "", "yz"],
                  ["Ab", "aB", "ab"], [" a ", "b"], ["one", "two", "three", "four"]),
}
_ALPHABET = "aaabbeexABB  ,-"
_WORDS = ("apple", "Bob", "cat", "a", "", "dog", "Ant", "x y", "hello", "be", "see", "tree", "ab", "ba", "EAST",
          "a-b", "bee", "axe")

# literal constants a program may contain when a slot declares no `consts` of its own
DEFAULT_LITERALS = {"int": (0, 1, 2, 3, 5, 10), "str": ("a", "e", "b", " ", ",", "-", "ab", "x")}
# a string literal is said quoted, as Python writes it ('ab', ' '); the empty one sometimes in words
STRING_WORDS = {"": ("the empty string", "''")}
TABLE_SIZE = 1024
RELATED = 10  # inputs with related arguments per pool
ITEM_TYPE = {"list[int]": "int", "list[str]": "str"}
INT_WORDS = {0: "zero", 1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 10: "ten"}


def _random_value(type_name: str, rng: random.Random):
    if type_name == "int":
        return rng.randint(-20, 20) if rng.random() < 0.7 else rng.randint(-100, 100)
    if type_name == "bool":
        return rng.random() < 0.5
    if type_name == "str":
        return "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 10)))
    if type_name == "list[int]":
        values = [rng.randint(-10, 20) for _ in range(rng.randint(0, 7))]
        if values and rng.random() < 0.4:
            values.append(rng.choice(values))  # a duplicate
            rng.shuffle(values)
        return values
    if type_name == "list[str]":
        return [rng.choice(_WORDS) if rng.random() < 0.7 else _random_value("str", rng)
                for _ in range(rng.randint(0, 5))]
    raise ValueError(f"no values for type {type_name!r}")


@lru_cache(maxsize=None)
def random_table(type_name: str) -> tuple:
    """TABLE_SIZE random values of a type, drawn once from a fixed seed; tasks pick from it (one RNG call a
    value instead of a dozen: generation is mostly drawing inputs)."""
    rng = random.Random(f"broad-values:{type_name}")
    return tuple(_random_value(type_name, rng) for _ in range(TABLE_SIZE))


def random_value(type_name: str, rng: random.Random):
    value = rng.choice(random_table(type_name))
    return list(value) if isinstance(value, list) else value


def input_pool(arg_types: tuple[str, ...], rng: random.Random, random_count: int = 26) -> list[tuple]:
    """Candidate inputs, edge values first: each argument takes six of its edge values (the others drawn at
    random), then `random_count` random combinations. Duplicates are removed, order kept."""
    pool = []
    for j, t in enumerate(arg_types):
        for edge in rng.sample(EDGE[t], min(6, len(EDGE[t]))):
            edge = list(edge) if isinstance(edge, list) else edge
            pool.append(tuple(edge if i == j else random_value(u, rng) for i, u in enumerate(arg_types)))
    pool.extend(tuple(random_value(t, rng) for t in arg_types) for _ in range(random_count))
    pool.extend(related_inputs(arg_types, rng, RELATED))
    seen, unique = set(), []
    for args in pool:
        key = repr(args)
        if key not in seen:
            seen.add(key)
            unique.append(args)
    return unique


def _derive(source, source_type: str, target_type: str, rng: random.Random):
    """A value of target_type made from `source`: a piece of a string, an element of a list, or itself."""
    if source_type == "str" and target_type == "str" and source and rng.random() < 0.75:
        start = 0 if rng.random() < 0.4 else rng.randrange(len(source))
        end = len(source) if rng.random() < 0.3 else min(len(source), start + rng.randint(1, 3))
        return source[start:end]
    if source_type.startswith("list") and source and ITEM_TYPE[source_type] == target_type:
        return rng.choice(source)
    if source_type == target_type:
        return list(source) if isinstance(source, list) else source
    return None


def related_inputs(arg_types: tuple[str, ...], rng: random.Random, count: int) -> list[tuple]:
    """Inputs whose arguments are related, so that tests like startswith, in, count and == are sometimes
    true: one argument derived from another (a piece of a string, an element of a list, an equal value),
    and every container argument empty once."""
    out = []
    for j, t in enumerate(arg_types):
        if t in ("str", "list[int]", "list[str]"):
            out.append(tuple(([] if t != "str" else "") if i == j else random_value(u, rng)
                             for i, u in enumerate(arg_types)))
    pairs = [(j, k) for j in range(len(arg_types)) for k in range(len(arg_types)) if j != k]
    for _ in range(count if pairs else 0):
        j, k = rng.choice(pairs)
        args = [random_value(u, rng) for u in arg_types]
        derived = _derive(args[j], arg_types[j], arg_types[k], rng)
        if derived is not None:
            args[k] = derived
            out.append(tuple(args))
    return out


def describe_literal(value, rng: random.Random) -> str:
    if isinstance(value, str):
        words = STRING_WORDS.get(value)
        return rng.choice(words) if words else repr(value)
    if isinstance(value, int) and value in INT_WORDS and rng.random() < 0.25:
        return INT_WORDS[value]
    return str(value)
