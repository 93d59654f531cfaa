"""A program tree as Python: the reference body (one `return` line, or a few lines when a call is written in
its block form), and the tree's value on an input (each primitive's compiled expression, children first).

Writing: every child is put in parentheses, then the whole function is parsed and printed again with
`ast.unparse`, which keeps only the parentheses Python needs (and writes string literals with single quotes;
it would print a lone generator argument as f((x for x in xs)), so templates use list comprehensions).
A child used twice by its parent's template is first stored in a local variable; a call written in its block
form stores its result in a local variable too. Local and loop names are fresh: never an argument's name.
Evaluation is eager (all children first), so a block form may compute a child earlier than a lazy `x if c
else y` would; inputs where any call raises are not used as cases, so both agree on every case.
"""

from __future__ import annotations

import ast
import random

from .primitive import LOOP_VARS, modest
from .trees import Node, Program

LOOP_NAMES = {"list[int]": ("x", "n", "v", "num"), "list[str]": ("w", "word", "s", "item"),
              "str": ("c", "ch", "letter"), None: ("d", "c", "ch")}
INDEX_NAMES = ("i", "j", "idx")
TEMP_NAMES = ("tmp", "part", "mid", "inner", "temp")
SPARE_NAMES = ("result", "res", "out", "ans")


class PreconditionFailed(Exception):
    """The input does not satisfy a primitive's `requires`."""


def evaluate(node: Node, inputs: tuple):
    if node.arg is not None:
        return inputs[node.arg]
    if node.sig is None:
        return node.value
    values = [evaluate(child, inputs) for child in node.children]
    prim = node.sig.prim
    if prim.precondition is not None and not prim.precondition(*values):
        raise PreconditionFailed(prim.name)
    value = prim.function(*values)
    if prim.bounded and not modest(value):
        raise PreconditionFailed(f"{prim.name}: a value too large for a user's primitive")
    return value


def run(node: Node, inputs: tuple):
    """(True, value) or (False, exception name). Lists are copied so that no program can change a case."""
    try:
        return True, evaluate(node, tuple(list(a) if isinstance(a, list) else a for a in inputs))
    except Exception as err:  # our own templates on drawn inputs: any failure just rules the input out
        return False, type(err).__name__


class _Writer:
    def __init__(self, rng: random.Random, arg_names):
        self.rng, self.arg_names = rng, list(arg_names)
        self.taken = set(arg_names)
        self.lines: list[str] = []

    def fresh(self, pool) -> str:
        for name in list(pool) + list(SPARE_NAMES):
            if name not in self.taken:
                self.taken.add(name)
                return name
        n = 2
        while f"{pool[0]}{n}" in self.taken:
            n += 1
        self.taken.add(f"{pool[0]}{n}")
        return f"{pool[0]}{n}"

    def fresh_shuffled(self, pool) -> str:
        pool = list(pool)
        first = self.rng.choice(pool)
        return self.fresh([first] + [p for p in pool if p != first])

    def write(self, node: Node) -> str:
        if node.arg is not None:
            return self.arg_names[node.arg]
        if node.sig is None:
            return repr(node.value)
        sig, prim = node.sig, node.sig.prim
        template = prim.block if node.form == "block" else prim.expr
        filled = {}
        for slot, child in zip(sig.slots, node.children):
            text = self.write(child)
            if child.is_call and template.count("{" + slot + "}") > 1:
                name = self.fresh_shuffled(TEMP_NAMES)
                self.lines.append(f"{name} = {text}")
                text = name
            filled[slot] = text if not child.is_call else f"({text})"
        containers = [t for t in sig.arg_types if t != "int" and t != "bool"]
        for k, var in enumerate(LOOP_VARS):
            if "{" + var + "}" in template:
                pool = INDEX_NAMES if var == "i" else LOOP_NAMES.get(containers[min(k, len(containers) - 1)]
                                                                     if containers else None, LOOP_NAMES[None])
                filled[var] = self.fresh_shuffled(pool)
        if node.form == "block":
            filled["out"] = self.fresh_shuffled(prim.out)
            self.lines.extend(template.format(**filled).strip("\n").splitlines())
            return filled["out"]
        return template.format(**filled)


def write_body(program: Program, arg_names, rng: random.Random) -> str:
    """The reference completion: starts with a newline, each line indented, ends with a newline."""
    writer = _Writer(rng, arg_names)
    result = writer.write(program.root)
    lines = writer.lines + [f"return {result}"]
    source = f"def _f({', '.join(arg_names)}):\n" + "".join(f"    {line}\n" for line in lines)
    function = ast.parse(source).body[0]
    text = "\n".join(ast.unparse(statement) for statement in function.body)
    return "\n" + "".join(f"    {line}\n" for line in text.splitlines())
