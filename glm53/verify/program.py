"""What enters the verifier: a `Program`, its fields named. Light (no torch): `glm53 verify` builds them.

Simplified: a bare tuple (source, entry_point, cases[, language]) is still taken at the verifier's door
(`as_program`) for callers written before the type; glm53's own callers build Programs with `completed`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    """A program to judge: its source, the function the cases call, the hidden cases [(args, expected), ...], and
    the language level it is checked at (None: the level the verifier was asked for as a whole)."""

    source: str
    entry_point: str
    cases: Sequence
    language: str | None = None
    # (function name, body): where `source` wraps a model-written body in a suite's own code (HumanEval's prompt and
    # test, data/humaneval.py), the static stage judges that body alone, as the body of a function of that name;
    # all of `source` still runs only in the sandbox. None: the static stage judges the whole source.
    model_body: tuple[str, str] | None = None

    def judged_source(self, entry_point: str) -> tuple[str, str]:
        """What the static stage judges, and the function it must define: the whole source and `entry_point`, or
        the model's body alone as the body of its function."""
        if self.model_body is None:
            return self.source, entry_point
        name, body = self.model_body
        return f"def {name}():\n{body}", name

    @classmethod
    def completed(cls, prompt: str, completion: str, entry_point: str, cases: Sequence,
                  language: str | None = None) -> Program:
        """A prompt and the completion (or reference body) written after it, judged as one program: the one place
        glm53 builds what it verifies (evaluation and RL, `glm53 verify`, the broad suite's reference check)."""
        return cls(prompt + completion, entry_point, tuple((tuple(args), expected) for args, expected in cases),
                   language)


def as_program(item: Program | Sequence) -> Program:
    """`item` as a Program: one already, or a tuple (source, entry_point, cases[, language])."""
    return item if isinstance(item, Program) else Program(*item)
