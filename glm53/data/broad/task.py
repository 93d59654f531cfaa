"""A broad task: the reference suite's Task (glm53.data.tasks) plus what the broad suite knows about it.

Rows written with to_json carry every Task key, so glm53.data.tasks.read_tasks reads them back as plain Tasks
(unknown keys are ignored), plus: "language": "python" (the verifier level the reference bodies need:
methods, loops, comprehensions), "split", "root" (root primitive), "depth", "phrasings" (phrasing ids),
"pairs" (parent>child primitive pairs) and "body" (the reference completion). The family is
"broad/<root primitive>", so per-family reports are per-root-primitive reports.
"""

from __future__ import annotations

from dataclasses import dataclass

from glm53.data.tasks import Task

HEADER = "# Complete this Python function."
LANGUAGE = "python"


def make_prompt(comment_lines: list[str], entry_point: str, arg_names) -> str:
    """Exactly the reference prompt shape, with the description over one or more comment lines."""
    return "\n".join([HEADER, *comment_lines, f"def {entry_point}({', '.join(arg_names)}):"])


@dataclass(frozen=True)
class BroadTask(Task):
    body: str = ""
    split: str = ""
    root: str = ""
    depth: int = 0
    phrasings: tuple = ()
    pairs: tuple = ()
    description: str = ""
    language: str = LANGUAGE

    @property
    def canonical_completion(self) -> str:
        return self.body

    @property
    def text(self) -> str:
        """Prompt and reference body: one pretraining document."""
        return self.prompt + self.body

    def to_json(self) -> dict:
        return {**super().to_json(), "language": self.language, "split": self.split, "root": self.root,
                "depth": self.depth, "phrasings": list(self.phrasings),
                "pairs": [f"{p}>{c}" for p, c in self.pairs], "body": self.body}
