"""Completions of many tasks in one process, written as the rows `glm53 verify` reads (`glm53 generate --tasks`).

Each row is the task as a task file holds it (`Task.to_json`, what `write_tasks` writes: task_id, family, prompt,
entry_point, cases, and a language level other than the reference) plus its `completion`; with several samples per
task, also the sample's 0-based index `sample`. `glm53 verify` reads prompt, completion, entry_point, cases and
language, keeps every other key, and adds the verdict. The completions come from evaluation's one function
(task_completions.py `evaluation_completions`, called by the command), so they are exactly the ones `glm53 eval`
judges with the same settings.

Simplification: the rows are held in memory and written once, atomically, at the end (no partial file after a
crash; a split is at most a few thousand rows). No header line: `glm53 verify` reads every line as a row.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..data.tasks import Task
from ..runtime.files import atomic_writer, json_text


def completion_rows(tasks: list[Task], completions: list[list[dict]], samples: int) -> Iterator[dict]:
    """One row per completion, task by task; `completions[i]` holds task i's `samples` records."""
    for task, group in zip(tasks, completions, strict=True):
        if len(group) != samples:
            raise ValueError(f"task {task.task_id}: {len(group)} completions, expected {samples}")
        for index, record in enumerate(group):
            row = {**task.to_json(), "completion": record["completion"]}
            if samples > 1:
                row["sample"] = index
            yield row


def write_completions(path: str | os.PathLike, tasks: list[Task], completions: list[list[dict]],
                      samples: int) -> int:
    """Write the rows as JSON Lines to `path`, atomically and never over an existing file; returns how many."""
    count = 0
    with atomic_writer(path) as out:
        for row in completion_rows(tasks, completions, samples):
            out.write(json_text(row) + "\n")
            count += 1
    return count
