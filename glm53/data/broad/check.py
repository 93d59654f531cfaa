"""Checking reference bodies: through glm53's verifier at language level `python`, or by plain exec.

The broad suite's bodies use what the reference suite's static check refuses (methods, loops), so they are
checked at the verifier's `python` level: `verify_many(items, timeout_s=..., pool=..., language="python")`.
Where the installed verifier has no such level yet, `reference_failures` falls back to plain exec (our own
generated code) and says so in its result.
"""

from __future__ import annotations

import inspect

from ...verify import verify_many
from ...verify.program import Program
from .task_draw import check_by_exec

LANGUAGE = "python"


def verifier_has_python_level() -> bool:
    return "language" in inspect.signature(verify_many).parameters


def verify_references(tasks, pool=None, timeout_s: float = 5.0) -> list[tuple[str, str]]:
    """[(task_id, "status: message")] for every task whose body the verifier does not pass."""
    items = [Program.completed(t.prompt, t.body, t.entry_point, t.cases) for t in tasks]
    verdicts = verify_many(items, timeout_s=timeout_s, pool=pool, language=LANGUAGE)
    return [(t.task_id, f"{v.status}: {v.message}") for t, v in zip(tasks, verdicts) if not v.passed]


def exec_failures(tasks) -> list[tuple[str, str]]:
    out = []
    for t in tasks:
        problem = check_by_exec(t.prompt + t.body, t.entry_point, t.cases)
        if problem:
            out.append((t.task_id, problem))
    return out


def reference_failures(tasks, pool=None, timeout_s: float = 5.0) -> tuple[str, list[tuple[str, str]]]:
    """("verifier" or "exec", failures): the verifier when it has the python level, else exec."""
    if verifier_has_python_level():
        return "verifier", verify_references(tasks, pool, timeout_s)
    return "exec", exec_failures(tasks)
