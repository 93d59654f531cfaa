"""Hidden cases for a program, and the rejection of degenerate programs (DeepCoder-style checks).

From a pool of candidate inputs (values.py: edge values first, then random ones) keep those on which the
program runs, meets every `requires`, returns its declared type and stays small. Reject the program when
fewer than MIN_CASES inputs fit, when its output is constant (for bool: when either value appears fewer than
twice), when it ignores an argument (replacing that argument by another case's value never changes the
output), or when it equals a shallower program on every pool input: an argument, a proper subtree, or the
tree with one call replaced by its own argument of the same type (sorted(sorted(xs)), lower(upper(s))...).
Then choose the cases: a few edge inputs, one input that tells the program from each shallower program, both
bool outputs at least twice, the rest at random, CASES in all.
Simplification: "shallower programs" are only those obtained by removing nodes of this tree, not every
program of smaller depth.
"""

from __future__ import annotations

import random
from functools import lru_cache

from .render import run
from .trees import Node, Program, replaced
from .types import has_type
from .values import input_pool

MIN_CASES = 8
CASES = 10
MAX_REPR = 120  # characters of repr(value) for any input or output of a case


class Degenerate(Exception):
    """The program is not worth a task; the message says why."""


def competitors(program: Program) -> list[tuple[str, Node]]:
    """Programs made from this one by removing nodes, with the root's type."""
    root, out = program.root, []
    for i, t in enumerate(program.arg_types):
        if t == root.type:
            out.append((f"argument {i}", Node(t, arg=i)))
    for node in root.walk():
        if node is not root and node.is_call and node.type == root.type:
            out.append((f"subtree {node.sig.prim.name}", node))
        for child in node.children:
            if node.is_call and child.type == node.type and node is not root:
                out.append((f"without {node.sig.prim.name}", replaced(root, node, child)))
    return out


def _small(value) -> bool:
    return len(repr(value)) <= MAX_REPR


def select_cases(program: Program, rng: random.Random) -> tuple:
    """((args, expected), ...) for the program, or Degenerate."""
    valid = []
    for inputs in input_pool(program.arg_types, rng):
        ok, out = run(program.root, inputs)
        if not ok or not all(_small(a) for a in inputs) or not _small(out):
            continue
        if not has_type(out, program.root.type):
            raise Degenerate(f"returns {type(out).__name__}, declared {program.root.type}")
        valid.append((inputs, out))
    if len(valid) < MIN_CASES:
        raise Degenerate(f"only {len(valid)} inputs fit")
    outputs = [repr(out) for _, out in valid]
    if len(set(outputs)) < 2:
        raise Degenerate("constant output")
    if program.root.type == "bool" and min(outputs.count("True"), outputs.count("False")) < 2:
        raise Degenerate("nearly constant output")
    for j in range(len(program.arg_types)):
        swapped = [tuple(valid[(n + 1) % len(valid)][0][j] if k == j else a for k, a in enumerate(inputs))
                   for n, (inputs, _) in enumerate(valid)]
        results = [run(program.root, s) for s in swapped]
        if all(not ok or repr(out) == outputs[n] for n, (ok, out) in enumerate(results)):
            raise Degenerate(f"ignores argument {j}")
    chosen = list(range(min(4, len(valid))))
    for label, other in competitors(program):
        differs = [n for n, (inputs, _) in enumerate(valid)
                   if (lambda r: not r[0] or repr(r[1]) != outputs[n])(run(other, inputs))]
        if not differs:
            raise Degenerate(f"equals a shallower program ({label})")
        if not set(differs) & set(chosen):
            chosen.append(rng.choice(differs))
    if program.root.type == "bool":
        for value in ("True", "False"):
            have = [n for n in chosen if outputs[n] == value]
            more = [n for n in range(len(valid)) if outputs[n] == value and n not in chosen]
            chosen.extend(rng.sample(more, min(len(more), max(0, 2 - len(have)))))
    rest = [n for n in range(len(valid)) if n not in chosen]
    rng.shuffle(rest)
    chosen.extend(rest[:max(0, CASES - len(chosen))])
    return tuple((tuple(valid[n][0]), valid[n][1]) for n in chosen)


@lru_cache(maxsize=256)
def probe_inputs(arg_types: tuple[str, ...]) -> tuple:
    return tuple(input_pool(arg_types, random.Random("probe:" + ",".join(arg_types)), 20))


def probe_signature(program: Program) -> tuple:
    """The program's outputs on fixed inputs that depend only on its argument types (for description
    conflicts: two programs behind one description must agree here)."""
    return tuple(repr(out) if ok else "!" for ok, out in (run(program.root, x)
                                                         for x in probe_inputs(program.arg_types)))
