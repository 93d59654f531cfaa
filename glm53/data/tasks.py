"""The eight synthetic Python task families, deterministic splits, and the JSON Lines task file format.

A task is a prompt that opens a one-argument function; the model writes the body. Each family has two
descriptions, a canonical body, three public example cases (the reference's, shown nowhere in a prompt but
listed here for documentation) and a set of hidden cases that the verifier checks: fixed edge cases plus four
random inputs drawn per task, so no lookup table of known inputs passes.

Splits: dev, rl, final and confirm are frozen lists built from fixed seeds (reference values); `pretrain` is an
unbounded stream for the corpus. Only function names differ between tasks of a family, as in the reference:
the benchmark measures generalisation to new identities, not to new algorithms.
"""

from __future__ import annotations

import json
import os
import random
import re
import string
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from ..runtime.files import atomic_write_text, json_text
from ..runtime.providers import provider
from ..verify.languages import LANGUAGES
from ..verify.program import Program

PROMPT_TEMPLATE = "# Complete this Python function.\n# {description}\ndef {entry_point}({arg}):"
SPLIT_SEEDS = {"dev": 1701, "final": 2909, "rl": 3907, "confirm": 8123}
EVAL_SPLITS = tuple(SPLIT_SEEDS)
FAMILY_SEED_STRIDE = 53
MAX_PER_FAMILY = 256  # frozen splits are capped so their names can be reserved away from the pretraining stream
RANDOM_HIDDEN_CASES = 4


@dataclass(frozen=True)
class Family:
    name: str
    arg: str
    descriptions: tuple[str, str]
    body: str  # the canonical completion, starting with "\n    return"
    solve: Callable
    public_examples: tuple  # ((args, expected), ...): the reference's three cases
    edge_inputs: tuple  # fixed hidden inputs (one argument each)
    random_input: Callable[[random.Random], object]


def _random_int(rng: random.Random) -> int:
    return rng.randint(-1000, 1000)


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + " ") for _ in range(rng.randint(1, 9)))


def _random_list(rng: random.Random) -> list[int]:
    return [rng.randint(-50, 50) for _ in range(rng.randint(1, 6))]


FAMILIES: tuple[Family, ...] = (
    Family("increment", "x", ("Return x plus one.", "Increase x by one."), "\n    return x + 1\n",
           lambda x: x + 1, (((-3,), -2), ((0,), 1), ((7,), 8)),
           (-1, 1, 2, -100, 999, -(2**40), 12345678901234567890), _random_int),
    Family("double", "x", ("Return two times x.", "Double the input."), "\n    return x * 2\n",
           lambda x: x * 2, (((-4,), -8), ((0,), 0), ((6,), 12)),
           (-1, 1, 3, -7, 255, 10**12, -(10**15)), _random_int),
    Family("square", "x", ("Return x squared.", "Multiply x by itself."), "\n    return x * x\n",
           lambda x: x * x, (((-4,), 16), ((0,), 0), ((5,), 25)),
           (-1, 1, 2, -3, 12, 10**9, -(10**6)), _random_int),
    Family("absolute", "x", ("Return the absolute value of x.", "Make a negative x positive."),
           "\n    return -x if x < 0 else x\n",
           lambda x: -x if x < 0 else x, (((-7,), 7), ((0,), 0), ((9,), 9)),
           (-1, 1, 3, -100, 100, -(2**31), 2**31), _random_int),
    Family("nonnegative", "x", ("Clamp x to at least zero.", "Return zero when x is negative."),
           "\n    return x if x > 0 else 0\n",
           lambda x: x if x > 0 else 0, (((-5,), 0), ((0,), 0), ((8,), 8)),
           (-1, 1, 2, -100, 100, -(2**31), 2**40), _random_int),
    Family("even", "x", ("Return whether x is even.", "Check divisibility by two."), "\n    return x % 2 == 0\n",
           lambda x: x % 2 == 0, (((-3,), False), ((0,), True), ((8,), True)),
           (-1, 1, 2, -2, 7, 100, -101, 10**18 + 1), _random_int),
    Family("reverse", "text", ("Return text in reverse order.", "Reverse the string."), "\n    return text[::-1]\n",
           lambda text: text[::-1], ((("",), ""), (("abc",), "cba"), (("level",), "level")),
           ("a", "ab", "hello world", "racecar", " x ", "12345", "h\u00e9llo", "Aa"), _random_text),
    Family("list_sum", "values", ("Return the sum of values.", "Add every number in the list."),
           "\n    return sum(values)\n",
           lambda values: sum(values), ((([],), 0), (([1, 2, 3],), 6), (([-2, 5],), 3)),
           ([0], [7], [-1, -2, -3], [10, -10], [100, 200, 300, 400], [5, 0, 5], [1] * 12), _random_list),
)
FAMILY_NAMES = tuple(f.name for f in FAMILIES)
FAMILY_BY_NAME = {f.name: f for f in FAMILIES}


@dataclass(frozen=True)
class Task:
    """One function to complete. `cases` are the hidden tests: [(args_list, expected), ...]. `language` is the
    verifier's language level its programs are checked at (glm53/verify/languages.py)."""

    task_id: str
    family: str
    prompt: str
    entry_point: str
    cases: tuple = field(repr=False)
    language: str = "reference"

    def to_json(self) -> dict:
        row = {"task_id": self.task_id, "family": self.family, "prompt": self.prompt,
               "entry_point": self.entry_point, "cases": [[list(args), expected] for args, expected in self.cases]}
        if self.language != "reference":  # reference rows stay as they always were
            row["language"] = self.language
        return row

    def program(self, completion: str) -> Program:
        """What the verifier judges for `completion`: the prompt and the completion as one program."""
        return Program.completed(self.prompt, completion, self.entry_point, self.cases, self.language)

    @property
    def canonical_completion(self) -> str | None:
        """The family's reference body, or None for a task whose family glm53 does not know."""
        family = FAMILY_BY_NAME.get(self.family)
        return family.body if family else None


def get_family(name: str) -> Family:
    if name not in FAMILY_BY_NAME:
        raise ValueError(f"unknown task family {name!r}; known families: {', '.join(FAMILY_NAMES)}")
    return FAMILY_BY_NAME[name]


def family_list(spec: str | Sequence[str] | None) -> list[str] | None:
    """The names of a family list ('a,b' or a sequence), or None for every family (None or 'all'). An empty list
    and a name given twice are refused: a family twice would give its tasks twice, under the same ids."""
    if spec is None or spec == "all":
        return None
    names = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else [str(s).strip() for s in spec]
    if not any(names):
        raise ValueError(f"--families {','.join(names)!r} names no family; give comma-separated names, or all")
    if "" in names:
        raise ValueError(f"--families {','.join(names)!r} holds an empty name (a stray comma); remove it")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"--families names {', '.join(twice)} more than once; give each family once (its tasks "
                         "would repeat under the same ids)")
    return names


def parse_families(spec: str | Sequence[str] | None) -> tuple[str, ...]:
    """'increment,double' -> ('increment', 'double'); None or 'all' -> every family, in canonical order."""
    names = family_list(spec)
    if names is None:
        return FAMILY_NAMES
    for name in names:
        get_family(name)
    return tuple(names)


def hidden_cases(family: Family, task_key: str) -> tuple:
    """Edge cases plus RANDOM_HIDDEN_CASES inputs drawn from the task's own key; public inputs never appear."""
    rng = random.Random(f"hidden-cases:{task_key}")
    public = [args[0] for args, _ in family.public_examples]
    inputs = list(family.edge_inputs)
    while len(inputs) < len(family.edge_inputs) + RANDOM_HIDDEN_CASES:
        candidate = family.random_input(rng)
        if candidate not in public and candidate not in inputs:
            inputs.append(candidate)
    return tuple(((x,), family.solve(x)) for x in inputs)


def make_task(family_name: str, split: str, index: int, seed: int) -> Task:
    """Reference construction: the name's 7 letters are drawn first from this seeded RNG, then the description."""
    family = get_family(family_name)
    rng = random.Random((seed + 1) * 1_000_003 + index * 9176 + sum(ord(c) for c in family.name))
    entry_point = f"{family.name}_" + "".join(rng.choice(string.ascii_lowercase) for _ in range(7))
    description = family.descriptions[rng.randrange(2)]
    prompt = PROMPT_TEMPLATE.format(description=description, entry_point=entry_point, arg=family.arg)
    task_id = f"{split}-{family.name}-{index:03d}"
    return Task(task_id, family.name, prompt, entry_point, hidden_cases(family, f"{task_id}:{seed}"))


def completion_room_problem(tasks: Sequence, max_new_tokens: int, context: int, flag: str, fit_context: bool = False,
                            context_flag: str | None = "--max-sequence-length") -> str | None:
    """Why the longest prompt of `tasks` (BOS + its UTF-8 bytes) plus `max_new_tokens` (the cap `flag` sets) does
    not fit a model context of `context` tokens (set by `context_flag`, or None: a checkpoint's), said before a run
    starts rather than at its first generation; with `fit_context` (a suite whose caps are cut to what the context
    leaves) only a prompt that leaves no room is. None when it fits."""
    if not tasks:
        return None
    longest = max(1 + len(t.prompt.encode("utf-8", "surrogatepass")) for t in tasks)
    if longest + (1 if fit_context else max_new_tokens) <= context:
        return None
    need = longest + max_new_tokens
    where = f"{context_flag} {context}" if context_flag else f"the checkpoint's context of {context}"
    larger = (f"{context_flag} {need} or more" if context_flag
              else f"a checkpoint pretrained with --max-sequence-length {need} or more")
    if fit_context or longest >= context:
        return f"the longest task prompt is {longest} tokens with BOS, which leaves no room in {where}; give {larger}"
    return (f"{flag} {max_new_tokens} after the longest task prompt ({longest} tokens with BOS) needs a context of "
            f"{need}, more than {where}; give {flag} {context - longest} or less, or {larger}")


def refuse_no_room(command: str, tasks: Sequence, max_new_tokens: int, context: int, flag: str,
                   fit_context: bool = False) -> None:
    """`completion_room_problem` as a one-line ValueError, raised before a run's folder exists."""
    problem = completion_room_problem(tasks, max_new_tokens, context, flag, fit_context)
    if problem:
        raise ValueError(f"{command}: {problem}")


def frozen_tasks(split: str, per_family: int = 4, families: str | Sequence[str] | None = None) -> list[Task]:
    """Tasks of an evaluation split, family-major (all of the first family, then the next ...)."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown split {split!r}; frozen splits are {', '.join(EVAL_SPLITS)} "
                         "(the pretraining stream is pretraining_task)")
    if not 1 <= per_family <= MAX_PER_FAMILY:
        raise ValueError(f"per_family must be in [1, {MAX_PER_FAMILY}], got {per_family}")
    tasks = []
    for name in parse_families(families):
        seed = SPLIT_SEEDS[split] + FAMILY_SEED_STRIDE * FAMILY_NAMES.index(name)
        tasks.extend(make_task(name, split, i, seed) for i in range(per_family))
    return tasks


@lru_cache(maxsize=1)
def reserved_entry_points() -> frozenset[str]:
    """Every name any frozen split can use (MAX_PER_FAMILY per family); the pretraining stream avoids them."""
    return frozenset(t.entry_point for split in EVAL_SPLITS for t in frozen_tasks(split, MAX_PER_FAMILY))


def pretraining_task(index: int, seed: int = 42) -> Task:
    """Document `index` of the pretraining stream: a uniformly drawn family, a fresh name.

    Matches the reference stream exactly, except that a name which collides with a frozen split's name is
    redrawn (with a shifted index), so no evaluation name is ever seen in pretraining.
    """
    if index < 0:
        raise ValueError(f"document index must be >= 0, got {index}")
    rng = random.Random(seed * 10_000_019 + index)
    family = FAMILY_NAMES[rng.randrange(len(FAMILIES))]
    reserved = reserved_entry_points()
    attempt = 0
    while True:
        task = make_task(family, "pretrain", index + attempt * 1_000_000_007, seed)
        if task.entry_point not in reserved:
            return task
        attempt += 1


def pretraining_text(index: int, seed: int = 42) -> str:
    """One complete function: prompt + canonical body."""
    task = pretraining_task(index, seed)
    return task.prompt + get_family(task.family).body


# --- task files -------------------------------------------------------------------------------------------

TASK_KEYS = ("task_id", "family", "prompt", "entry_point", "cases")  # required; optional: "language"


def task_from_json(obj: dict, where: str = "task") -> Task:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object with keys {list(TASK_KEYS)}")
    missing = [k for k in TASK_KEYS if k not in obj]
    if missing:
        raise ValueError(f"{where}: missing keys {missing}; each line needs {list(TASK_KEYS)}")
    for key in ("task_id", "family", "prompt", "entry_point"):
        if not isinstance(obj[key], str) or not obj[key]:
            raise ValueError(f"{where}: {key!r} must be a non-empty string")
    if not obj["entry_point"].isidentifier():
        raise ValueError(f"{where}: entry_point {obj['entry_point']!r} is not a Python identifier")
    check_entry_point(obj["prompt"], obj["entry_point"], where, obj["task_id"])
    cases = obj["cases"]
    if not isinstance(cases, list) or not cases:
        raise ValueError(f"{where}: 'cases' must be a non-empty list of [args_list, expected]")
    parsed = []
    for j, case in enumerate(cases):
        if not (isinstance(case, list) and len(case) == 2 and isinstance(case[0], list)):
            raise ValueError(f"{where}: case {j} must be [args_list, expected], got {case!r}")
        parsed.append((tuple(case[0]), case[1]))
    language = obj.get("language", "reference")
    if language not in LANGUAGES:
        raise ValueError(f"{where}: 'language' must be one of {', '.join(LANGUAGES)}, got {language!r}")
    return Task(obj["task_id"], obj["family"], obj["prompt"], obj["entry_point"], tuple(parsed), language)


def check_entry_point(prompt: str, entry_point: str, where: str = "task", task_id: str | None = None) -> None:
    """The function the verifier calls must be one the prompt opens at the top level (`def NAME(` at the start of
    a line), in a prompt whose code starts unindented: a task whose entry point the model is never asked to write
    (no `def` of it, a class of that name, a method or nested function) or whose every program is an
    IndentationError can never be solved. Each refusal names `where` (the file and line), the task and the fix."""
    task = f" of task {task_id!r}" if task_id else ""
    name = re.escape(entry_point)
    first = next((line for line in prompt.split("\n") if line.strip() and not line.lstrip().startswith("#")), "")
    if first[:1] in (" ", "\t"):
        raise ValueError(f"{where}: the prompt{task} starts indented ({first.strip()[:40]!r} after "
                         f"{len(first) - len(first.lstrip())} blanks), so every program made from it is an "
                         f"IndentationError and no completion can ever pass; remove the indentation, so that "
                         f"`def {entry_point}(` starts its line")
    if re.search(rf"^def[ \t]+{name}[ \t]*\(", prompt, re.MULTILINE):
        return
    if re.search(rf"^[ \t]*class[ \t]+{name}\b", prompt, re.MULTILINE):
        raise ValueError(f"{where}: entry_point {entry_point!r} is a class the prompt defines, not a function, so "
                         f"no completion{task} can ever pass (the verifier calls the entry point with each case's "
                         "arguments and compares what it returns); set entry_point to a function the prompt opens "
                         "with a `def` at the start of a line")
    if re.search(rf"^[ \t]+def[ \t]+{name}[ \t]*\(", prompt, re.MULTILINE):
        raise ValueError(f"{where}: entry_point {entry_point!r} is opened by an indented `def` (a method or a nested "
                         f"function), which the verifier cannot call by its name, so no completion{task} can ever "
                         f"pass; open it with `def {entry_point}(` at the start of a line")
    opened = re.findall(r"^def[ \t]+(\w+)[ \t]*\(", prompt, re.MULTILINE)
    raise ValueError(f"{where}: entry_point {entry_point!r} is not a function its prompt opens ("
                     + (f"the prompt defines {', '.join(opened)}" if opened else "the prompt has no `def`")
                     + f"), so no completion{task} can ever pass; set entry_point to the function the prompt opens")


def read_tasks(path: str | os.PathLike) -> list[Task]:
    """A task file: JSON Lines, one task object a line, with keys TASK_KEYS and optionally "language" (the
    verifier's level for its programs, default "reference"); other keys are ignored. Blank lines and lines whose
    first character is `#` (comments, such as a split's header) are skipped. Or the same rows as a dataset (a
    folder `save_to_disk` wrote, DIR:SPLIT of a folder of splits, or a .parquet file), which
    glm53/interop/datasets_io.py reads (a floor above, so asked for by role); each row is checked here as a line is."""
    rows = provider("tasks from a dataset")(path)  # None: not a dataset
    tasks, seen = [], {}
    for where, position, obj in _task_lines(Path(path)) if rows is None else rows:
        task = task_from_json(obj, where)
        if task.task_id in seen:
            raise ValueError(f"{where}: duplicate task_id {task.task_id!r} (first on {seen[task.task_id]}); each "
                             "task needs its own id")
        seen[task.task_id] = position
        tasks.append(task)
    if not tasks:
        raise ValueError(f"task file {path} holds no tasks")
    return tasks


def _task_lines(path: Path) -> Iterator[tuple[str, str, object]]:
    """(where, position, object) of each task line of a JSON Lines file, read as they are checked (so the first
    bad line is the one named)."""
    if path.is_dir():
        raise ValueError(f"task file {path} is a folder; give a JSON Lines file (write one with `glm53 tasks export`), "
                         "a .parquet file or a folder `save_to_disk` wrote")
    if not path.is_file():
        raise FileNotFoundError(f"task file {path} does not exist; write one with `glm53 tasks export`")
    # lines end at "\n" only: str.splitlines also ends one at U+2028 and other separators, which JSON allows raw
    # inside a string, so a valid row would read as two halves that are not JSON
    for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
        yield f"{path}:{lineno}", f"line {lineno}", obj


def write_tasks(tasks: Iterable[Task], path: str | os.PathLike) -> None:
    """Write JSON Lines atomically; refuses to overwrite an existing file, and to write a file `read_tasks` would
    refuse (a task_id twice, an entry point its prompt does not open), naming the line it would have been on."""
    tasks, seen = list(tasks), {}
    for lineno, task in enumerate(tasks, start=1):
        where = f"{path}:{lineno} (not written)"
        if task.task_id in seen:
            raise ValueError(f"{where}: duplicate task_id {task.task_id!r} (first on line {seen[task.task_id]}); "
                             "each task needs its own id")
        seen[task.task_id] = lineno
        check_entry_point(task.prompt, task.entry_point, where, task.task_id)
    text = "".join(json_text(t.to_json()) + "\n" for t in tasks)
    atomic_write_text(path, text, overwrite=False)
