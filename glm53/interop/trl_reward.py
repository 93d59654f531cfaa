"""glm53's sandboxed verifier as a reward function for TRL's trainers (GRPOTrainer, RLOOTrainer, ...).

    from glm53.interop.trl_reward import sandbox_reward
    trainer = GRPOTrainer(model=..., reward_funcs=[sandbox_reward("binary")], train_dataset=tasks, args=...)

TRL calls a reward as `f(prompts=[...], completions=[...], completion_ids=[...], **columns)`: every dataset column
but `prompt` as a list, one item per completion. The columns are a glm53 task row's (data/tasks.py, the rows of
`glm53 tasks export`): `prompt` (TRL's prompt column, passed as `prompts`), `entry_point` and `cases`
([[args_list, expected], ...], or that list as JSON text, as a datasets column holds values of mixed types), and
optionally `language`; any other column (task_id, family, a broad row's body, ...) is ignored. So an exported split
is a GRPO train dataset as it is.

Each completion is judged as `glm53 rl` judges its own rollouts:
1. ended where glm53's generation ends it. TRL generates to EOS or max_completion_length; glm53 stops at its suite's
   stop rule (decode/task_completions.py's `task_stop_rule`: the reference suite's after the body's first complete
   statement, the broad suite's where the function ends, cut there by `cut_to_function`). The reward applies that
   rule to the text: the shortest prefix at which it fires (the rules fire only at a line's end or at the character
   after it), which is where the byte tokenizer's engine stops. A completion where it never fires is judged whole,
   as glm53 judges one that hit its token cap. `stop` picks the rule: "suite" (the default) is the rule of the suite
   whose language level the row is judged at (reference: statement; python, python-stdlib: function); None judges
   the text as given, as `glm53 verify` does.
2. verified by `verify_completions` (evaluate/evaluate.py), the function RL calls: prompt + completion as one program
   at the row's level (its `language`, else reference, as `glm53 verify` reads a row; `level` sets every row's and
   refuses a row naming another), all of one call's completions in one batch on this process's sandbox pool, with
   the verifier's default CPU and wall-clock limits.
3. rewarded by the mode (verify/rewards.py): `binary` (1 when every case passes, 0 for a valid program that does
   not, `invalid_penalty` for one the static check refuses) or `partial` (the fraction of cases passed, plus
   `exact_bonus` when all pass; `invalid_penalty` if invalid). Defaults are `glm53 rl`'s. glm53's weighted sum of
   reward functions is TRL's `reward_weights` here: give the trainer more reward functions.

The first call in a process checks the sandbox's isolation and refuses a level below full unless made with
`accept_partial_isolation=True`, as `glm53 rl` does; `.sandbox` then holds the record for a receipt. A callable
object rather than a closure, so it pickles (TRL's async GRPO sends reward functions to a spawned process); its
`__name__` (glm53_binary, glm53_partial) is what TRL logs its rewards under.

Simplifications: TRL's loss covers every token it generated up to EOS or the cap, glm53's only those up to the stop,
so past the stop the tokens are trained on a reward they did not change. Conversational completions (lists of
messages) are refused: glm53's tasks are text completed after their prompt. A row whose `cases` is None (a row of
another dataset mixed in) gets None, which TRL reads as "not applicable".
"""

from __future__ import annotations

import json
import math
import os

from ..data.suites import SUITE_NAMES, SUITES, get_suite
from ..data.tasks import Task
from ..decode.generate import cut_to_function
from ..decode.task_completions import task_stop_rule
from ..evaluate.evaluate import verify_completions
from ..verify.languages import DEFAULT_LANGUAGE, LANGUAGES
from ..verify.rewards import REWARD_MODES, reward
from ..verify.sandbox_policy import missing_layers, sandbox_record
from ..verify.verify_file import row_problem

STOPS = ("suite", "statement", "function")  # or None: no cut
COLUMNS = ("entry_point", "cases")  # besides the prompt; optional: language
# the stop rule of the suite whose language level a row is judged at, and the suite task_stop_rule builds a rule from
STOP_OF_LEVEL = {suite.language: suite.stop for suite in SUITES.values()}
SUITE_OF_STOP = {get_suite(name).stop: name for name in reversed(SUITE_NAMES)}


class SandboxReward:
    """A TRL reward function: glm53's verdict on each completion, as a reward mode (see the module's docstring)."""

    def __init__(self, mode: str, level: str | None, stop: str | None, invalid_penalty: float, exact_bonus: float,
                 accept_partial_isolation: bool):
        self.mode, self.level, self.stop = mode, level, stop
        self.invalid_penalty, self.exact_bonus = invalid_penalty, exact_bonus
        self.accept_partial_isolation = accept_partial_isolation
        self.__name__ = f"glm53_{mode}"  # TRL logs rewards/<__name__>/mean
        self.sandbox: dict | None = None  # the isolation record, once checked in this process
        self._checked_pid: int | None = None

    def __repr__(self) -> str:
        return (f"sandbox_reward({self.mode!r}, level={self.level!r}, stop={self.stop!r}, "
                f"invalid_penalty={self.invalid_penalty!r}, exact_bonus={self.exact_bonus!r})")

    def __call__(self, prompts: list, completions: list, completion_ids: list | None = None,
                 **columns) -> list[float | None]:
        rows = self.rows(prompts, completions, columns)
        judged = [i for i, task in enumerate(rows) if task is not None]
        if not judged:
            return [None] * len(completions)
        self.check_isolation()
        tasks = [rows[i] for i in judged]
        texts = [self.stopped(task, completions[i]) for i, task in zip(judged, tasks)]
        verdicts = verify_completions(tasks, [[{"completion": text}] for text in texts])
        rewards: list[float | None] = [None] * len(completions)
        for i, group in zip(judged, verdicts):
            rewards[i] = reward(group[0][1], self.mode, self.invalid_penalty, self.exact_bonus)
        return rewards

    def rows(self, prompts: list, completions: list, columns: dict) -> list[Task | None]:
        """Each completion's task (None where its row's `cases` is None); a bad row is one line naming it."""
        n = len(completions)
        for name in COLUMNS:
            if name not in columns:
                raise ValueError(f"sandbox_reward: the dataset has no {name!r} column; each row needs prompt, "
                                 f"entry_point and cases (and optionally language), the columns of a glm53 task row "
                                 f"(glm53 tasks export writes them)")
        named = {"prompts": prompts, **{name: columns[name] for name in (*COLUMNS, "language") if name in columns}}
        for name, values in named.items():
            if len(values) != n:
                raise ValueError(f"sandbox_reward: {len(values)} {name} for {n} completions; give one of each per "
                                 f"completion, as TRL does")
        languages = columns.get("language") or [None] * n
        task_ids = columns.get("task_id") or [None] * n  # named in errors
        task_ids = task_ids if len(task_ids) == n else [None] * n
        return [None if columns["cases"][i] is None else
                self.task(i, prompts[i], completions[i], columns["entry_point"][i], columns["cases"][i],
                          languages[i], task_ids[i])
                for i in range(n)]

    def task(self, i: int, prompt, completion, entry_point, cases, language, task_id) -> Task:
        """Row `i` as a Task at its level, checked as `glm53 verify` checks a row (verify_file.row_problem)."""
        where = f"sandbox_reward: row {i} of the batch" + (f" (task {task_id})" if task_id else "")
        for name, text in (("prompt", prompt), ("completion", completion)):
            if isinstance(text, list):
                raise ValueError(f"{where}: the {name} is a conversation (a list of messages); glm53's tasks are "
                                 f"text completed after their prompt: use a dataset whose prompt column is text, as "
                                 f"glm53 tasks export writes it")
        if isinstance(cases, str):
            try:
                cases = json.loads(cases)
            except ValueError as err:
                raise ValueError(f"{where}: 'cases' is text but not JSON ({err})") from None
        row = {"prompt": prompt, "completion": completion, "entry_point": entry_point, "cases": cases,
               **({"language": language} if language is not None else {})}
        try:
            line = json.dumps(row)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{where}: its cases hold a value that is not JSON ({err}); give [[args_list, "
                             f"expected], ...] of JSON values, as a glm53 task row holds them") from None
        row, problem = row_problem(line, None)
        if problem:
            raise ValueError(f"{where}: {problem}")
        if self.level is not None and language is not None and language != self.level:
            raise ValueError(f"{where}: the row names language {language!r} but sandbox_reward was made with "
                             f"level={self.level!r}; leave level out to judge each row at its own level")
        level = self.level or language or DEFAULT_LANGUAGE
        return Task(str(task_id or ""), "", row["prompt"], row["entry_point"],
                    tuple((tuple(args), expected) for args, expected in row["cases"]), level)

    def stopped(self, task: Task, completion: str) -> str:
        """`completion` ended where glm53's generation would have ended it (see the module's docstring)."""
        if self.stop is None:
            return completion
        rule = STOP_OF_LEVEL[task.language] if self.stop == "suite" else self.stop
        fires = task_stop_rule([task], SUITE_OF_STOP[rule])
        ends = sorted({p + k for p, char in enumerate(completion) if char == "\n" for k in (1, 2)
                       if p + k <= len(completion)})
        for end in ends:
            if fires(task.prompt, completion[:end]):
                record = {"completion": completion[:end], "token_ids": []}
                return (cut_to_function(record) if rule == "function" else record)["completion"]
        return completion

    def check_isolation(self) -> None:
        """Once a process (a spawned copy checks its own): refuse a sandbox below full isolation unless accepted."""
        if self._checked_pid == os.getpid():
            return
        record = sandbox_record(self.accept_partial_isolation)
        if record["level"] != "full" and not self.accept_partial_isolation:
            raise ValueError(f"sandbox_reward: the sandbox lacks {', '.join(missing_layers(record)) or 'a layer'} "
                             f"(isolation level {record['level']}); make the reward with "
                             f"accept_partial_isolation=True to reward with it anyway, or run where every layer is "
                             f"available (as root on Linux)")
        self.sandbox, self._checked_pid = record, os.getpid()


def sandbox_reward(mode: str = "binary", *, level: str | None = None, stop: str | None = "suite",
                   invalid_penalty: float = -0.1, exact_bonus: float = 0.0,
                   accept_partial_isolation: bool = False) -> SandboxReward:
    """A TRL reward function judging each completion in glm53's sandbox (the module's docstring says how).

    mode: binary or partial. level: None (each row's `language` column, else reference) or a language level for
    every row. stop: "suite", "statement", "function" or None (no cut). invalid_penalty (<= 0) and exact_bonus
    (>= 0): glm53 rl's --invalid-penalty and --exact-bonus, with its defaults."""
    if mode not in REWARD_MODES:
        raise ValueError(f"sandbox_reward: unknown mode {mode!r}; choose one of {', '.join(REWARD_MODES)}")
    if level is not None and level not in LANGUAGES:
        raise ValueError(f"sandbox_reward: unknown level {level!r}; choose one of {', '.join(LANGUAGES)}, or None "
                         f"for each row's own language")
    if stop is not None and stop not in STOPS:
        raise ValueError(f"sandbox_reward: unknown stop {stop!r}; choose one of {', '.join(STOPS)}, or None to judge "
                         f"completions as given")
    for name, value, ok, rule in (("invalid_penalty", invalid_penalty, lambda v: v <= 0, "<= 0"),
                                  ("exact_bonus", exact_bonus, lambda v: v >= 0, ">= 0")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not ok(value):
            raise ValueError(f"sandbox_reward: {name} must be a finite number {rule}, got {value!r}")
    return SandboxReward(mode, level, stop, float(invalid_penalty), float(exact_bonus), accept_partial_isolation)
