"""The human split: 88 hand-written Python functions, for evaluation only (never trained on).

human.jsonl (beside this module) opens with its header as `# ` comment lines (who wrote it, when, and that no
task came from a public benchmark), which the task-file reader skips; each task row has task_id, family
"human", prompt, entry_point, cases, language "python" and `solution` (a reference body, kept for the tests
that run every solution through the verifier; the reader ignores it). The split is not generated from the
registry, so a user's primitive file does not change it; the broad pretraining stream and the rl split are
tested to hold none of its names, prompts or descriptions (tests/data/broad/test_human.py).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from ..tasks import read_tasks

HUMAN_FILE = Path(__file__).with_name("human.jsonl")
HUMAN_SPLIT = "human"


@lru_cache(maxsize=1)
def _human_tasks() -> tuple:
    return tuple(read_tasks(HUMAN_FILE))


def human_tasks(n: int | None = None) -> list:
    """The first n tasks of the human split (all of them by default), as glm53.data.tasks.Task rows."""
    tasks = list(_human_tasks())
    if n is not None and not 1 <= n <= len(tasks):
        raise ValueError(f"the human split holds {len(tasks)} tasks; n must be in [1, {len(tasks)}], got {n}")
    return tasks if n is None else tasks[:n]


def human_rows() -> list[dict]:
    """The split's rows as written (with `solution`), comment lines skipped."""
    lines = HUMAN_FILE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip() and not line.startswith("#")]
