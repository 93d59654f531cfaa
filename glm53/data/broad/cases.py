"""Hidden cases for a program, and the rejection of degenerate programs (DeepCoder-style checks).

From a pool of candidate inputs (input_values.py: edge values, random ones, ones with related arguments) keep those
on which the program runs, meets every `requires`, returns its declared type and stays small. Reject the
program when fewer than MIN_CASES inputs fit, when its output is constant, when it ignores an argument
(replacing that argument by another case's value never changes the output), or when it equals a shallower
program on every pool input: an argument, a proper subtree, or the tree with one call replaced by its own
argument of the same type (sorted(sorted(xs)), len(sorted(xs)), lower(upper(s))...).
Then choose the cases: a few edge inputs, one input that tells the program from each shallower program, both
bool outputs twice where the pool has them, the rest at random, CASES in all.
Simplifications: "shallower programs" are only those obtained by removing nodes of this tree, not every
program of smaller depth; an input outside a program's domain (min of an empty list) is simply not a case.
"""

from __future__ import annotations

import random
from functools import lru_cache

from .render import run
from .trees import Node, Program, replaced
from .types import has_type
from .input_values import input_pool

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


def _differs(node: Node, inputs: tuple, output: str, must_run: bool = False) -> bool:
    """Whether `node` gives another output than `output` (a repr) on `inputs`; raising counts as different
    unless `must_run`."""
    ok, out = run(node, inputs)
    return repr(out) != output if ok else not must_run


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
    for j in range(len(program.arg_types)):
        swapped = (tuple(valid[(n + 1) % len(valid)][0][j] if k == j else a for k, a in enumerate(inputs))
                   for n, (inputs, _) in enumerate(valid))
        if not any(_differs(program.root, s, outputs[n], must_run=True) for n, s in enumerate(swapped)):
            raise Degenerate(f"ignores argument {j}")
    chosen = list(range(min(4, len(valid))))
    for label, other in competitors(program):
        # an input that tells them apart: among the chosen ones first, else the first of the others
        order = chosen + [n for n in range(len(valid)) if n not in chosen]
        found = next((n for n in order if _differs(other, valid[n][0], outputs[n])), None)
        if found is None:
            raise Degenerate(f"equals a shallower program ({label})")
        if found not in chosen:
            chosen.append(found)
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
