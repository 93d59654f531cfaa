"""Programs as trees: a call of a primitive signature whose arguments are calls, function arguments or
literals, drawn to an exact depth (a lone call has depth 1), with 1 to 3 function arguments.

Drawing: the root's signature first, then one argument slot carries the chain down to the wanted depth while
the other slots are, most often, leaves. A leaf is a literal when its slot declares `consts` (sometimes also
for an int or str slot without them), otherwise a function argument: an existing one of the same type (never
the same one twice in a call) or a new one. A call takes at most one literal beyond its `consts` slots and
at least one child that is not a literal. `pair_ok(parent, child)` says which parent/child primitive pairs
may be drawn, which is how the `compose` split's pairs stay out of everything else.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from .input_values import DEFAULT_LITERALS

MAX_ARGS = 3
P_LITERAL = 0.2  # an int/str leaf without `consts` is a literal this often
P_REUSE = 0.25  # a leaf reuses an existing argument of its type this often (when one fits)
P_SECOND_CHILD = 0.2  # another slot of a call carries a subtree too


class Redraw(Exception):
    """This draw cannot be completed (no argument left of a needed type, no allowed child...)."""


@dataclass(frozen=True)
class Node:
    type: str
    sig: object = None  # a Signature for a call
    children: tuple = ()
    arg: int | None = None  # function argument index for an argument leaf
    value: object = None  # the literal of a literal leaf
    form: str = "expr"  # "expr" or "block": how the call is written (same function)

    @property
    def is_call(self) -> bool:
        return self.sig is not None

    @property
    def is_literal(self) -> bool:
        return self.sig is None and self.arg is None

    @property
    def depth(self) -> int:
        return 1 + max((c.depth for c in self.children), default=0) if self.is_call else 0

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def pairs(self):
        """(parent primitive, child primitive) names for every call directly inside a call."""
        for node in self.walk():
            for child in node.children:
                if child.is_call:
                    yield node.sig.prim.name, child.sig.prim.name


@dataclass(frozen=True)
class Program:
    root: Node
    arg_types: tuple[str, ...]

    @property
    def depth(self) -> int:
        return self.root.depth

    def calls(self) -> list[Node]:
        return [n for n in self.root.walk() if n.is_call]


def replaced(root: Node, target: Node, new: Node) -> Node:
    """`root` with the node `target` (by identity) replaced by `new`."""
    if root is target:
        return new
    if not root.children:
        return root
    return replace(root, children=tuple(replaced(c, target, new) for c in root.children))


class _Drawer:
    def __init__(self, rng: random.Random, registry, pair_ok, block_rate: float):
        self.rng, self.registry, self.pair_ok, self.block_rate = rng, registry, pair_ok, block_rate
        self.args: list[str] = []

    def child_sig(self, parent, type_name: str):
        options = [s for s in self.registry.producers[type_name] if self.pair_ok(parent.prim.name, s.prim.name)]
        if not options:
            raise Redraw(f"no allowed child of type {type_name} under {parent.prim.name}")
        prim = self.rng.choice(sorted({s.prim.name for s in options}))  # primitives uniformly, then a binding
        return self.rng.choice([s for s in options if s.prim.name == prim])

    def leaf(self, type_name: str, consts, taken: set[int]) -> Node:
        rng = self.rng
        if consts:
            return Node(type_name, value=rng.choice(consts))
        if type_name in DEFAULT_LITERALS and rng.random() < P_LITERAL:
            return Node(type_name, value=rng.choice(DEFAULT_LITERALS[type_name]))
        same = [i for i, t in enumerate(self.args) if t == type_name and i not in taken]
        if same and (len(self.args) == MAX_ARGS or rng.random() < P_REUSE):
            return Node(type_name, arg=rng.choice(same))
        if len(self.args) < MAX_ARGS:
            self.args.append(type_name)
            return Node(type_name, arg=len(self.args) - 1)
        if type_name in DEFAULT_LITERALS:
            return Node(type_name, value=rng.choice(DEFAULT_LITERALS[type_name]))
        raise Redraw(f"no argument left for a {type_name}")

    def call(self, sig, depth: int, forced: dict | None = None) -> Node:
        """A call of `sig` of exactly `depth`; `forced` maps a slot index to a child signature."""
        rng, prim = self.rng, sig.prim
        open_slots = [j for j, slot in enumerate(sig.slots) if slot not in prim.consts]
        forced = forced or {}
        deep = next(iter(forced), None)
        if depth > 1 and deep is None:
            if not open_slots:
                raise Redraw(f"{prim.name} has no slot for a subtree")
            deep = rng.choice(open_slots)
        children, taken = [], set()
        for j, (slot, type_name) in enumerate(zip(sig.slots, sig.arg_types)):
            if j in forced:
                children.append(self.call(forced[j], depth - 1))
            elif j == deep and depth > 1:
                children.append(self.call(self.child_sig(sig, type_name), depth - 1))
            elif depth > 1 and j in open_slots and rng.random() < P_SECOND_CHILD:
                sub_depth = rng.randint(1, depth - 1)
                children.append(self.call(self.child_sig(sig, type_name), sub_depth))
            else:
                leaf = self.leaf(type_name, prim.consts.get(slot), taken)
                if leaf.arg is not None:
                    taken.add(leaf.arg)
                children.append(leaf)
        free_literals = sum(c.is_literal for c, slot in zip(children, sig.slots) if slot not in prim.consts)
        if free_literals > 1 or all(c.is_literal for c in children):
            raise Redraw(f"{prim.name} of literals only")  # max(1, 0), 'a' + 'b': a constant in disguise
        form = "block" if prim.block is not None and rng.random() < self.block_rate else "expr"
        return Node(sig.result, sig=sig, children=tuple(children), form=form)


def draw_program(rng: random.Random, registry, depth: int, pair_ok, root_sig=None, forced_child=None,
                 block_rate: float = 0.25, shuffle_rate: float = 0.3) -> Program:
    """A program of exactly `depth`. `forced_child=(slot index, signature)` puts that child under the root."""
    drawer = _Drawer(rng, registry, pair_ok, block_rate)
    if root_sig is None:
        prim = rng.choice(registry.primitives)
        root_sig = rng.choice(prim.signatures)
    forced = dict([forced_child]) if forced_child else None
    root = drawer.call(root_sig, depth, forced)
    if not drawer.args:
        raise Redraw("the program has no argument")
    order = list(range(len(drawer.args)))
    if len(order) > 1 and rng.random() < shuffle_rate:
        rng.shuffle(order)  # argument order differs from the order of first use
    position = {old: new for new, old in enumerate(order)}

    def renumber(node: Node) -> Node:
        if node.arg is not None:
            return replace(node, arg=position[node.arg])
        return replace(node, children=tuple(renumber(c) for c in node.children)) if node.children else node

    return Program(renumber(root), tuple(drawer.args[old] for old in order))
