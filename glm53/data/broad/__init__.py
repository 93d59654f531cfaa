"""The `broad` suite: generated Python functions, from a registry of primitives declared as data, composed to
depth 1-3 and described by a grammar from the same tree, with hidden cases and held-out splits.

Reading order:

    types.py            the five value types (int, str, bool, list[int], list[str]) and the type variable T
    input_values.py     edge and random input values per type; literals and how a description says them
    primitive.py        one primitive: templates, phrasings, examples, the compiled expression
    registry.py         the registry as data: TOML files (primitives/*.toml), checked on load
    primitives/         the built-in primitives: numbers, logic, strings, lists, comprehensions
    trees.py            program trees drawn to an exact depth, with 1-3 function arguments
    render.py           a tree as a reference body (a return line or a few lines), and its value on inputs
    cases.py            hidden cases, and the rejection of degenerate programs
    identifiers.py      argument names, function names with reservable suffixes
    describe.py         the description grammar: phrasings, frames, composition styles, comment lines
    heldout.py          the pairs held out for `compose`, the phrasings held out for `phrase`
    task.py             BroadTask: a glm53.data.tasks.Task with language "python", split, root, depth, phrasings
    task_draw.py        one task from a seeded draw, redrawn until usable
    splits.py           frozen splits (dev, rl, confirm, compose, phrase) and the pretraining stream
    docstring.py        a task's prompt in docstring style (PEP 257), and the stream mixed with such documents
    check.py            reference bodies through the verifier's python level (or exec until it exists)
    extension.py        a user's own primitive file, checked and merged (examples/extra_primitives.toml)
    stream_primitives.py  a primitive file for the pretraining stream only (stream/wider.toml), and its guard
    task_file.py        export_tasks, for the CLI
    human.py            the human split: 88 hand-written functions (human.jsonl), for evaluation only

Usage:

    from glm53.data.broad import frozen_broad_tasks, broad_pretraining_text, export_tasks
    tasks = frozen_broad_tasks("compose", 50)          # BroadTask rows: .prompt, .body, .cases, .to_json()
    text = broad_pretraining_text(12345)               # one pretraining document
    tasks = export_tasks("dev", 100, extra="my_primitives.toml")
"""

from .check import reference_failures, verifier_has_python_level
from .task_file import export_tasks
from .extension import EXAMPLE, load_registry
from .heldout import held_out_pairs, held_out_phrasings, is_held_out_pair
from .registry import Registry, RegistryError, builtin_registry
from .splits import (FROZEN_SPLITS, IN_DISTRIBUTION, MAX_PER_SPLIT, SPLIT_SEEDS, broad_pretraining_task,
                     broad_pretraining_text, frozen_broad_tasks, reserved_suffixes)
from .task import BroadTask

__all__ = ["BroadTask", "EXAMPLE", "FROZEN_SPLITS", "IN_DISTRIBUTION", "MAX_PER_SPLIT", "Registry", "RegistryError",
           "SPLIT_SEEDS", "broad_pretraining_task", "broad_pretraining_text", "builtin_registry", "export_tasks",
           "frozen_broad_tasks", "held_out_pairs", "held_out_phrasings", "is_held_out_pair", "load_registry",
           "reference_failures", "reserved_suffixes", "verifier_has_python_level"]
