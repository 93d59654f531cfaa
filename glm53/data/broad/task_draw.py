"""One task from a seeded draw: a program tree, its hidden cases, argument names, a description, a function
name and the reference body; redrawn (a new attempt of the same index) until it is usable.

A draw is refused when the tree cannot be completed, the program is degenerate (cases.py), prompt + body is
longer than MAX_BYTES, or the description conflicts: `conflicts` maps (description, argument names and
types) to the program's outputs on fixed probe inputs, over a window of tasks (a whole frozen split, or one
block of the pretraining stream); the same description for a program that behaves differently is refused.
Simplification: the window is not global, so a description may mean another function in another window.
Every reference body is checked as it is made: the verifier's static check (python level), then `exec` on its
cases with that level's builtins only (a user's templates are in it); the verifier runs them in its sandbox in
tests and export (check.py).
"""

from __future__ import annotations

import builtins
import random

from ...verify.languages import get_language
from ...verify.static_check import StaticCheckError, check_source
from .cases import Degenerate, probe_signature, select_cases
from .describe import comment_lines, describe
from .heldout import held_out_pairs, is_held_out_pair, stream_pair_ok
from .identifiers import draw_arg_names, function_stem
from .render import write_body
from .task import BroadTask, make_prompt
from .trees import Redraw, draw_program

MODES = ("in", "compose", "phrase")
DEPTH_WEIGHTS = {"in": {1: 0.35, 2: 0.4, 3: 0.25}, "compose": {2: 0.65, 3: 0.35},
                 "phrase": {1: 0.35, 2: 0.4, 3: 0.25}}
MAX_BYTES = 320  # prompt + body, UTF-8; the model's context is ~256 bytes for most
MAX_ATTEMPTS = 400
P_HELD_FRAME = 0.3  # in the phrase split, the held-out part is a frame or style this often, else a call's phrasing


def _draw_program(rng: random.Random, registry, mode: str):
    weights = DEPTH_WEIGHTS[mode]
    depth = rng.choices(list(weights), list(weights.values()))[0]
    if mode != "compose":
        return draw_program(rng, registry, depth, stream_pair_ok)
    parent, child = rng.choice(held_out_pairs(registry))
    prim = registry.by_name[parent]
    options = [(sig, j, c) for sig in prim.signatures for j, (slot, t) in enumerate(zip(sig.slots, sig.arg_types))
               if slot not in prim.consts for c in registry.producers[t] if c.prim.name == child]
    sig, j, child_sig = rng.choice(options)
    return draw_program(rng, registry, depth, stream_pair_ok, root_sig=sig, forced_child=(j, child_sig))


def check_by_exec(source: str, entry_point: str, cases) -> str | None:
    """None when `source` passes the verifier's static check (python level) and returns every expected value
    (same type and value), else what went wrong."""
    try:
        check_source(source, entry_point, language="python")
    except StaticCheckError as err:
        return f"is refused by the verifier's static check ({err})"
    # the builtins the sandbox gives that level's programs: a body may hold a user's templates
    namespace: dict = {"__builtins__": {name: getattr(builtins, name) for name in get_language("python").builtins}}
    exec(compile(source, "<broad task>", "exec"), namespace)
    function = namespace[entry_point]
    for args, expected in cases:
        try:
            got = function(*[list(a) if isinstance(a, list) else a for a in args])
        except Exception as err:
            return f"raises {type(err).__name__} on {args!r}"
        if type(got) is not type(expected) or got != expected:
            return f"returns {got!r} on {args!r}, expected {expected!r}"
    return None


def make_task(registry, split: str, task_id: str, key: str, name_suffix: str, mode: str = "in",
              conflicts: dict | None = None) -> BroadTask:
    """The task for `key` (a string naming split, seed and index); attempts are numbered in the key."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; modes are {MODES}")
    conflicts = {} if conflicts is None else conflicts
    reasons: dict[str, int] = {}
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"broad:{key}:{attempt}")
        try:
            program = _draw_program(rng, registry, mode)
            cases = select_cases(program, random.Random(f"broad-cases:{key}:{attempt}"))
        except (Redraw, Degenerate) as err:
            reason = type(err).__name__
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        arg_names = draw_arg_names(rng, program.arg_types)
        held = None if mode != "phrase" else ("frame" if rng.random() < P_HELD_FRAME else "call")
        description, phrasings, variables = describe(program, arg_names, rng, registry, held)
        entry_point = f"{function_stem(rng, description, program, arg_names, variables)}_{name_suffix}"
        prompt = make_prompt(comment_lines(description), entry_point, arg_names)
        body = write_body(program, arg_names, rng)
        if len((prompt + body).encode()) > MAX_BYTES:
            reasons["long"] = reasons.get("long", 0) + 1
            continue
        signature = (description, tuple(arg_names), program.arg_types)
        behaviour = probe_signature(program)
        if conflicts.get(signature, behaviour) != behaviour:
            reasons["conflict"] = reasons.get("conflict", 0) + 1
            continue
        problem = check_by_exec(prompt + body, entry_point, cases)
        if problem:
            names = sorted({n.sig.prim.name for n in program.calls()})
            raise RuntimeError(f"{task_id}: the reference body of a program using {names} {problem}; "
                               f"is a block form different from its expression?\n{prompt + body}")
        conflicts[signature] = behaviour
        pairs = tuple(program.root.pairs())
        if mode != "compose":
            assert not any(is_held_out_pair(p, c) for p, c in pairs)
        root = program.root.sig.prim.name
        return BroadTask(task_id, f"broad/{root}", prompt, entry_point, cases, body=body, split=split, root=root,
                         depth=program.depth, phrasings=tuple(phrasings), pairs=pairs, description=description)
    raise RuntimeError(f"{task_id}: no usable task in {MAX_ATTEMPTS} draws ({reasons})")
