"""One primitive of the registry: its data (types, expression, block form, phrasings, examples) and the Python
function compiled from its expression, which the generator uses to evaluate programs on inputs.

Templates use str.format placeholders: the primitive's slots ({a}, {xs}...), loop variables {v}, {w}, {i}
(fresh names chosen when a program is written), and in a block form {out}, the variable holding the result.
A slot that declares `consts` is always a literal drawn from them. `requires` is a condition on the slots'
values; an input where it is false (or where the expression raises) is not used as a case.

Templates run in this process (the generator evaluates them on thousands of inputs) with only the builtins they
may name: a user's file is untrusted, and its templates pass the verifier's static check first (registry.py).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from functools import cached_property

from .types import resolve

LOOP_VARS = ("v", "w", "i")
# what a user's primitive may give on a generated input (Primitive.bounded): ints no larger than the built-in
# grammar reaches in one step from its inputs (square(100)), strings and lists no longer than a case may print, so a
# built-in primitive after it allocates no more than the built-in grammar alone can make it
MODEST_INT = 10_000
MODEST_LENGTH = 1_000


def modest(value) -> bool:
    """Whether `value` is within what a user's primitive may give (MODEST_INT, MODEST_LENGTH)."""
    if isinstance(value, int):
        return abs(value) <= MODEST_INT
    if isinstance(value, (str, list)):
        return len(value) <= MODEST_LENGTH and all(modest(item) for item in value if not isinstance(value, str))
    return True
# builtins a template may call: ordinary Python at the verifier's `python` language level
TEMPLATE_BUILTINS = frozenset({"abs", "all", "any", "bool", "divmod", "enumerate", "int", "len", "list", "max",
                               "min", "range", "reversed", "round", "set", "sorted", "str", "sum", "tuple", "zip"})


@dataclass(frozen=True)
class Signature:
    """A primitive at one binding of T: concrete argument types and result type."""

    prim: "Primitive"
    binding: str | None
    arg_types: tuple[str, ...]
    result: str

    @property
    def slots(self) -> tuple[str, ...]:
        return self.prim.slots

    @property
    def key(self) -> str:
        return f"{self.prim.name}[{self.binding}]" if self.binding else self.prim.name


@dataclass(frozen=True, eq=False)
class Primitive:
    name: str
    args: tuple[tuple[str, str], ...]  # (slot, type spec): "int", "T", "item(T)"...
    result: str  # a type spec
    expr: str
    phrasings: tuple[str, ...]  # in the pretraining stream and the in-distribution splits
    held_out: tuple[str, ...] = ()  # only in the `phrase` split
    bindings: tuple[str | None, ...] = (None,)  # the values of T
    block: str | None = None  # a few statements computing {out}, the same function as expr
    consts: dict = field(default_factory=dict)  # slot -> tuple of literals
    requires: str | None = None
    words: tuple[str, ...] = ()  # content words for function names
    out: tuple[str, ...] = ("result",)  # names for {out}
    examples: tuple = ()  # ((args, expected), ...)
    origin: str = "built-in"
    # a user's primitive (not the package's own): each value it gives on a generated input must be `modest`, or the
    # input is ruled out. A built-in primitive downstream may allocate by its value (count_up's list(range(n)),
    # repeat's s * k), and a user's int the size of power(100, 5) would make it allocate gigabytes in this process.
    bounded: bool = False

    @property
    def slots(self) -> tuple[str, ...]:
        return tuple(slot for slot, _ in self.args)

    @cached_property
    def signatures(self) -> tuple[Signature, ...]:
        return tuple(Signature(self, b, tuple(resolve(t, b) for _, t in self.args), resolve(self.result, b))
                     for b in self.bindings)

    def phrasing_ids(self) -> list[tuple[str, str, bool]]:
        """[(id, template, held_out)]: in-stream ids are name/0, name/1..., held-out ones name/h0, name/h1..."""
        return ([(f"{self.name}/{i}", p, False) for i, p in enumerate(self.phrasings)]
                + [(f"{self.name}/h{i}", p, True) for i, p in enumerate(self.held_out)])

    def loop_vars(self, template: str) -> tuple[str, ...]:
        return tuple(v for v in LOOP_VARS if "{" + v + "}" in template)

    def source(self, form: str) -> str:
        """The template `form` (expr, block or requires) as the source of a function `_f` of the slots."""
        if form == "block":
            lines = self._internal(self.block).strip("\n").splitlines() + ["return _out"]
        elif form == "requires":
            lines = [f"return bool({self._internal(self.requires)})"]
        else:
            lines = [f"return {self._internal(self.expr)}"]
        return f"def _f({', '.join(self.slots)}):\n" + "".join(f"    {line}\n" for line in lines)

    def _compile(self, form: str):
        # only the builtins a template may name: no __import__, open or eval for code that got past the checks
        namespace = {"__builtins__": {name: getattr(builtins, name) for name in TEMPLATE_BUILTINS}}
        exec(compile(self.source(form), f"<primitive {self.name}>", "exec"), namespace)
        return namespace["_f"]

    def _internal(self, template: str) -> str:
        names = {slot: slot for slot in self.slots} | {v: f"_{v}" for v in LOOP_VARS} | {"out": "_out"}
        return template.format(**names)

    @cached_property
    def function(self):
        """The expression as a Python function of the slots (positional, in slot order)."""
        return self._compile("expr")

    @cached_property
    def block_function(self):
        return None if self.block is None else self._compile("block")

    @cached_property
    def precondition(self):
        return None if self.requires is None else self._compile("requires")
