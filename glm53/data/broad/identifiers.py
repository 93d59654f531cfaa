"""Names: function arguments (a varied pool per type), function names (content words of the description or
of the primitives, or a neutral word) with a 7-letter random suffix that makes every name unique and lets the
frozen splits reserve theirs, and the nouns a description may use instead of an argument's name.
"""

from __future__ import annotations

import random
import re
import string

ARG_NAMES = {
    "int": ("x", "n", "k", "a", "b", "m", "num", "count", "limit", "y", "value", "step"),
    "str": ("s", "text", "string", "word", "name", "line", "t", "phrase", "label"),
    "bool": ("flag", "cond", "ok", "enabled", "strict", "active"),
    "list[int]": ("xs", "nums", "numbers", "values", "items", "lst", "data", "scores", "arr", "ys"),
    "list[str]": ("words", "names", "strings", "items", "lst", "parts", "tokens", "lines", "labels"),
}
# what a description may call an argument that is the only one of its type
TYPE_NOUNS = {"int": ("the number", "the given number", "the integer"),
              "str": ("the string", "the given text", "the input string"),
              "list[int]": ("the list", "the given numbers", "the input list"),
              "list[str]": ("the list of strings", "the given words", "the input list")}
NEUTRAL = ("f", "func", "solve", "compute", "helper", "process", "calc", "task", "fn", "answer", "transform", "run")
STOPWORDS = frozenset("""a an the of and or in to by with is are be it its each every from for that this as at on
return returns compute give back find check whether true false otherwise if then let write call first when which
function tell whose than into what all any only one not no there their them up down copy list string number
numbers strings given input result value same both also either else case after before over until unless holds
set where least most how many way than kept keeping only version""".split())
SUFFIX_LETTERS = 7


def draw_arg_names(rng: random.Random, arg_types) -> list[str]:
    names: list[str] = []
    for t in arg_types:
        names.append(rng.choice([n for n in ARG_NAMES[t] if n not in names]))
    return names


def suffix(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(SUFFIX_LETTERS))


def content_words(description: str, exclude) -> list[str]:
    words = re.findall(r"[a-z]+", description.lower())
    return [w for w in words if len(w) > 2 and w not in STOPWORDS and w not in exclude]


def function_stem(rng: random.Random, description: str, program, arg_names, aliases=()) -> str:
    """The name before the suffix: description words (45%), primitive words (35%) or a neutral word."""
    roll = rng.random()
    if roll < 0.45:
        words = list(dict.fromkeys(content_words(description, set(arg_names) | set(aliases))))
        if words:
            start = rng.randrange(min(2, len(words)))
            return "_".join(words[start:start + rng.choice((1, 2, 2))])
    if roll < 0.8:
        calls = program.calls()
        stem = rng.choice(calls[0].sig.prim.words)
        if len(calls) > 1 and rng.random() < 0.4 and "_" not in stem:
            stem += "_" + rng.choice(calls[1].sig.prim.words).split("_")[0]
        return stem
    return rng.choice(NEUTRAL)
