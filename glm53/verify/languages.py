"""The language levels the static stage accepts, declared as data.

Three levels:

- `reference`: the subset the reference suite's one-line families need (the reference system's rules):
  expressions, assignments, if/else and comprehensions over 19 pure builtins; no attribute access, no loops,
  no lambdas, no recursion, no rebinding of a builtin or of the entry point.
- `python`: ordinary Python for small functions: loops (`for`, `while`, `break`, `continue`), if/else,
  comprehensions, assignments of every kind, `try`/`except`/`raise`, `assert`, `del`, lambdas and nested
  functions, recursion, star expressions, the methods of the builtin value types (str, list, dict, set, tuple,
  int, bool, float) named in `PYTHON_ATTRIBUTES`, and the builtins in `PYTHON_BUILTINS` (set, dict, map, filter,
  isinstance, chr, ord, min/max/sorted with `key=`, ...). Refused: imports, classes, `with`, `global`,
  generators (`yield`), `async`, `match` (its class patterns read arbitrary attributes), decorators, any name
  or attribute starting with two underscores, any attribute outside the allow-list (none of its names reaches a
  frame, a code object, a generator's or coroutine's internals, a traceback or a module: `gi_frame`,
  `tb_frame`, `f_back`, `with_traceback`, `format`, `mro` are all absent), attribute stores, and format fields
  in string constants that look up attributes or items. `eval`, `exec`, `open`, `getattr`, `globals`, `type`,
  `object` and the like are not builtins of the candidate's namespace and are refused by name as well.

- `python-stdlib`: the `python` level, plus `import` and `from ... import` of eight pure standard-library modules
  (`STDLIB_MODULES`: math, typing, collections, re, string, random, copy, hashlib; only the names listed for each),
  the attributes those names need, `print` (which writes nowhere) and `eval` as an arithmetic calculator (number
  literals and operators only; the sandbox never gives Python's own eval). The level HumanEval's problems need
  (glm53/data/humaneval.py); why each module is safe is said beside it.

The allow-lists are names, not types: the stage cannot know a value's type, so every listed name must be
harmless on every object a program can reach. A program that slips past this stage still meets the OS wall
(isolation.py), which is tested on its own with this stage switched off.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

LANGUAGES = ("reference", "python", "python-stdlib")
DEFAULT_LANGUAGE = "reference"

REFERENCE_BUILTINS = frozenset({"abs", "all", "any", "bool", "divmod", "enumerate", "int", "len", "list", "max",
                                "min", "range", "reversed", "round", "sorted", "str", "sum", "tuple", "zip"})

PYTHON_BUILTINS = REFERENCE_BUILTINS | frozenset({
    "bin", "chr", "dict", "filter", "float", "format", "frozenset", "hex", "isinstance", "iter", "map", "next",
    "oct", "ord", "pow", "set",
    # exceptions a small function may raise or catch
    "ArithmeticError", "Exception", "IndexError", "KeyError", "LookupError", "StopIteration", "TypeError",
    "ValueError", "ZeroDivisionError",
})

_STR = ("capitalize", "casefold", "center", "count", "endswith", "expandtabs", "find", "index", "isalnum",
        "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric", "isprintable",
        "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans", "partition",
        "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit", "rstrip",
        "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill")
_LIST = ("append", "clear", "copy", "count", "extend", "index", "insert", "pop", "remove", "reverse", "sort")
_DICT = ("clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem", "setdefault", "update", "values")
_SET = ("add", "clear", "copy", "difference", "difference_update", "discard", "intersection",
        "intersection_update", "isdisjoint", "issubset", "issuperset", "pop", "remove", "symmetric_difference",
        "symmetric_difference_update", "union", "update")
_NUMBER = ("bit_count", "bit_length", "conjugate", "denominator", "imag", "is_integer", "numerator", "real")
# Deliberately absent: str.format and format_map (a template built at run time can walk attributes),
# encode/decode (bytes are outside the value types), and everything starting with an underscore.
PYTHON_ATTRIBUTES = frozenset(_STR + _LIST + _DICT + _SET + _NUMBER)

# The modules the python-stdlib level may import, and the names of each it may use (as `from m import name` or
# `m.name`). Each is pure computation on values: none opens a file, a socket or a process, none reaches the
# interpreter (no module, frame or code object among the names), and the sandbox imports them before any program
# runs (a program's process, in an empty root, could not load a module). A program gets a view of each module with
# only these names and no class: a class named here (Counter, deque, Random, ...) comes as a function that makes one
# (candidate_builtins.py), since a Python class's plain functions take any first argument. Left out on purpose:
# string.Formatter and Template and str.format (a template built at run time can walk attributes),
# typing.get_type_hints (it evaluates strings), collections.namedtuple (it execs the code it builds),
# random.SystemRandom (it needs a system call), and typing's abstract classes (Sequence, Iterable, ...).
STDLIB_MODULES = {
    "math": ("acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "comb", "copysign", "cos", "cosh",
             "degrees", "dist", "e", "erf", "erfc", "exp", "expm1", "fabs", "factorial", "floor", "fmod", "frexp",
             "fsum", "gamma", "gcd", "hypot", "inf", "isclose", "isfinite", "isinf", "isnan", "isqrt", "lcm",
             "ldexp", "lgamma", "log", "log10", "log1p", "log2", "modf", "nan", "perm", "pi", "pow", "prod",
             "radians", "remainder", "sin", "sinh", "sqrt", "tan", "tanh", "tau", "trunc"),
    "typing": ("Any", "Dict", "List", "Optional", "Tuple", "Union"),
    "collections": ("Counter", "OrderedDict", "defaultdict", "deque"),
    "re": ("A", "ASCII", "I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL", "compile", "escape", "findall",
           "finditer", "fullmatch", "match", "search", "split", "sub", "subn"),
    "string": ("ascii_letters", "ascii_lowercase", "ascii_uppercase", "digits", "hexdigits", "octdigits",
               "printable", "punctuation", "whitespace"),
    "random": ("Random", "choice", "choices", "randint", "random", "randrange", "sample", "seed", "shuffle",
               "uniform"),
    "copy": ("copy", "deepcopy"),
    "hashlib": ("md5", "sha1", "sha256", "sha512"),
}
# methods of the values those modules make: a Counter, a deque, a match object, a hash, bytes
_STDLIB_VALUE_METHODS = ("appendleft", "elements", "extendleft", "most_common", "move_to_end", "popleft", "rotate",
                         "subtract", "total", "end", "group", "groupdict", "groups", "span", "start",
                         "digest", "hexdigest", "decode", "encode")

# Names refused wherever they appear at level python, for a clear message (none is in the candidate's builtins).
FORBIDDEN_NAMES = frozenset({"breakpoint", "compile", "delattr", "dir", "eval", "exec", "exit", "getattr",
                             "globals", "hasattr", "help", "id", "input", "locals", "memoryview", "object", "open",
                             "print", "property", "quit", "setattr", "super", "type", "vars", "classmethod",
                             "staticmethod"})

_ALWAYS_FORBIDDEN = {
    ast.Import: "import", ast.ImportFrom: "import", ast.ClassDef: "class", ast.With: "with",
    ast.AsyncWith: "with", ast.Global: "global", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Await: "await",
    ast.AsyncFunctionDef: "async function", ast.AsyncFor: "loop", ast.Match: "match",
}
_REFERENCE_ONLY_FORBIDDEN = {
    ast.Attribute: "attribute access", ast.For: "loop", ast.While: "loop", ast.Lambda: "lambda", ast.Try: "try",
    ast.Raise: "raise", ast.Nonlocal: "nonlocal", ast.Delete: "del", ast.FunctionDef: "nested function",
    ast.Assert: "assert", ast.Starred: "star expression",
}
if hasattr(ast, "TryStar"):
    _ALWAYS_FORBIDDEN[ast.TryStar] = "try"


@dataclass(frozen=True)
class Language:
    """One level: what the static stage refuses and which builtins the sandbox gives the candidate."""

    name: str
    builtins: frozenset
    forbidden_nodes: dict
    attributes: frozenset  # attribute names a program may read (empty: no attribute access at all)
    forbidden_names: frozenset
    protect_builtins: bool  # refuse rebinding an allowed builtin (the reference rule)
    allow_recursion: bool
    modules: dict = field(default_factory=dict)  # importable module -> the names of it a program may use


LANGUAGE_BY_NAME = {
    "reference": Language("reference", REFERENCE_BUILTINS, {**_ALWAYS_FORBIDDEN, **_REFERENCE_ONLY_FORBIDDEN},
                          frozenset(), frozenset(), protect_builtins=True, allow_recursion=False),
    "python": Language("python", PYTHON_BUILTINS, dict(_ALWAYS_FORBIDDEN), PYTHON_ATTRIBUTES, FORBIDDEN_NAMES,
                       protect_builtins=False, allow_recursion=True),
    "python-stdlib": Language(
        "python-stdlib", PYTHON_BUILTINS | {"eval", "print"},
        {k: v for k, v in _ALWAYS_FORBIDDEN.items() if k not in (ast.Import, ast.ImportFrom)},
        PYTHON_ATTRIBUTES | frozenset(_STDLIB_VALUE_METHODS)
        | frozenset(name for names in STDLIB_MODULES.values() for name in names),
        FORBIDDEN_NAMES - {"eval", "print"}, protect_builtins=False, allow_recursion=True,
        modules={m: frozenset(ns) for m, ns in STDLIB_MODULES.items()}),
}


def get_language(name: str) -> Language:
    if name not in LANGUAGE_BY_NAME:
        raise ValueError(f"unknown language level {name!r}; choose one of: {', '.join(LANGUAGES)}")
    return LANGUAGE_BY_NAME[name]
