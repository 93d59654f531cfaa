"""The builtins a candidate program is defined with: its language level's names, and at the python-stdlib level a
calculator for `eval`, a `print` that writes nowhere and an `__import__` that gives views of eight preloaded modules
(their listed names only, classes behind functions that make them).

Standard library only: sandbox_worker.py imports it, as a script under -I, before any fork. The modules are loaded
here, at import, because a program's process, in an empty root, could not load a module.
"""

from __future__ import annotations

import ast
import builtins
# the modules the python-stdlib level lets a program import (languages.py STDLIB_MODULES); a program reaches them
# only through `_importer`, and only at that level
import collections
import copy
import hashlib
import heapq  # noqa: F401 - not importable by a program: Counter.most_common imports it when called
import math
import random
import re
import string
import types
import typing

PRELOADED = {m.__name__: m for m in (collections, copy, hashlib, math, random, re, string, typing)}

# `eval` at the python-stdlib level: a calculator. Only number literals and arithmetic operators compile; Python's
# own eval, which would run any code a string holds past the static stage, is never given to a program.
_ARITHMETIC = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Add, ast.Sub, ast.Mult, ast.Div,
               ast.FloorDiv, ast.Mod, ast.Pow, ast.USub, ast.UAdd)


def arithmetic_eval(text, *unused):
    if not isinstance(text, str):
        raise TypeError("eval takes a string of arithmetic")
    tree = ast.parse(text.strip(), mode="eval")
    for node in ast.walk(tree):
        if not isinstance(node, _ARITHMETIC) or (isinstance(node, ast.Constant) and type(node.value) not in (int,
                                                                                                             float)):
            raise ValueError("eval here computes arithmetic of number literals only")
    return eval(compile(tree, "<arithmetic>", "eval"), {"__builtins__": {}})


def print_nowhere(*unused, **unused_keywords) -> None:
    """`print` at the python-stdlib level: the program's output goes nowhere (its stdout is /dev/null anyway)."""


def _maker(cls: type):
    """A function that makes a `cls`, in the class's place: a program never holds a class, because a Python class's
    plain functions take any first argument (`Counter.copy(int)` is `type`), and a class is what builds objects
    with methods of one's own (an `__eq__` that says yes to everything)."""
    def make(*args, **kwargs):
        return cls(*args, **kwargs)

    make.__name__ = make.__qualname__ = cls.__name__
    return make


def module_view(module, names) -> types.SimpleNamespace:
    """A module as a program sees it: only its listed names (`typing.Counter` is not `collections.Counter`), each
    class behind `_maker`."""
    return types.SimpleNamespace(**{name: _maker(value) if isinstance(value, type) else value
                                    for name in names for value in [getattr(module, name)]})


def _importer(modules: dict):
    """`__import__` for a program that may use `modules` (name -> its listed names): the view, or ImportError."""
    allowed = {name: module_view(PRELOADED[name], names) for name, names in modules.items() if name in PRELOADED}

    def import_allowed(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0 or name not in allowed:
            raise ImportError(f"import of {name!r} is not allowed")
        return allowed[name]

    return import_allowed


def candidate_builtins(allowed: list, modules: dict, raw: bool = False) -> dict:
    """The candidate's builtins: the names its level allows; `print` and `eval` as the harmless forms above and
    `__import__` limited to views of its level's modules (a raw table, for the OS-wall tests' probe, is Python's
    own)."""
    table = {name: getattr(builtins, name) for name in allowed if hasattr(builtins, name)}
    if not raw:
        for name, safe in (("eval", arithmetic_eval), ("print", print_nowhere)):
            if name in table:
                table[name] = safe
        table.pop("__import__", None)
        if modules:
            table["__import__"] = _importer(modules)
    return table
