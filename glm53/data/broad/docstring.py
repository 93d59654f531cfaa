"""A second rendering of a broad task's prompt: the description as the function's docstring (PEP 257), not as
comment lines above it.

    comment (the tasks as drawn; stream document 20 of seed 42)

    # Complete this Python function.
    # Give back whichever of the length of phrase, and num is lower.
    def lower_ecynhtu(phrase, num):
        return min(len(phrase), num)

    docstring (`docstring_task` of the same task)

    def lower_ecynhtu(phrase, num):
        \"\"\"Give back whichever of the length of phrase, and num is lower.

        >>> lower_ecynhtu('Hello World', 18)
        11
        \"\"\"
        return min(len(phrase), num)

The docstring is the description as its summary (wrapped at SUMMARY_WIDTH, a period added where it lacks one), a
blank line, and one example in doctest form, `>>> f(args)` and the value, both written with repr; the closing
quotes stand on their own line. The example is the first of the task's own hidden cases whose call and value
together fit in EXAMPLE_CHARS characters and keep the document within the suite's length bound: it shows exactly
what one hidden case would, and no more (the verifier checks every case, at least 8 and mostly 10, so a body that
only reproduces the example cannot pass); a fresh input would need the program tree, which a finished task no
longer has. When no case fits, the docstring is the summary alone (one line: `\"\"\"Summary.\"\"\"`).

The prompt ends with the docstring's closing line and its newline; the completion is the body without its
leading newline, so prompt + completion is the same function text either way, and the stop rule and the verifier
judge it unchanged (a function's docstring is allowed by the static check at every level). The task is the same
drawn task (same cases, entry point, family, depth): no random draw is made, so the comment-style tasks stay
exactly as they were; its id gets the suffix "-doc" so receipts keep the two styles apart.

Pretraining mixes the two styles per document (`docstring_share`, `mixed_stream`): document i of seed s is in
docstring style when a hash of (s, i) falls below the share, so a resumed run and a rerun read the same documents,
and a share of 0 is the stream itself. Evaluation chooses one style for all its tasks (`styled_tasks`); RL may
also take `both` (RL_PROMPT_STYLES): each task in the one style a hash of its task id picks (`in_docstring_half`),
so about half of the rl and dev tasks are in each style, every task once (a run of as many groups as tasks still
sees each task once), independent of the seed, and the same tasks in the same style on every run.
The human split's hand-written prompts are comment style too and are rendered the same way (their comment lines
joined into the description, the example from their cases).
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import replace

from .describe import wrap_description
from .task import HEADER, BroadTask
from .task_draw import MAX_BYTES

PROMPT_STYLES = ("comment", "docstring")
DEFAULT_STYLE = "comment"
BOTH = "both"  # RL only: each task in one style, chosen by a hash of its id
RL_PROMPT_STYLES = PROMPT_STYLES + (BOTH,)
SUFFIX = "-doc"
INDENT = "    "
SUMMARY_WIDTH = 72  # characters of summary per line (PEP 8's limit for docstrings), after the indent
EXAMPLE_CHARS = 60  # the example's call and value together, as written


def parse_comment_prompt(prompt: str) -> tuple[str, list[str]]:
    """(description, argument names) of a comment-style prompt: HEADER, `# ` comment lines, the def line."""
    lines = prompt.split("\n")
    if len(lines) < 3 or lines[0] != HEADER or not all(line.startswith("# ") for line in lines[1:-1]):
        raise ValueError(f"not a comment-style prompt (the header {HEADER!r}, comment lines, a def line): "
                         f"{prompt[:80]!r}")
    function = ast.parse(lines[-1] + " pass").body[0]
    return " ".join(line[2:] for line in lines[1:-1]), [a.arg for a in function.args.args]


def example_text(entry_point: str, case) -> tuple[str, str]:
    """A case as a doctest example: the call and its value, each written with repr."""
    args, value = case
    return f"{entry_point}({', '.join(repr(a) for a in args)})", repr(value)


def docstring_prompt(description: str, entry_point: str, arg_names, example: tuple[str, str] | None = None) -> str:
    """The def line and the docstring (PEP 257): the summary lines, then a blank line and the example (a call and
    its value), the closing quotes on their own line; a summary alone on one line is a one-line docstring. A raw
    docstring where the text holds a backslash (PEP 257). Ends with a newline."""
    summary = description.strip()
    summary = summary if summary.endswith(".") else summary + "."
    lines = wrap_description(summary, SUMMARY_WIDTH)
    if example is not None:
        lines += ["", f">>> {example[0]}", example[1]]
    if any('"""' in line for line in lines):
        raise ValueError(f"{entry_point}: a docstring cannot hold three double quotes: {lines}")
    quote = 'r"""' if any("\\" in line for line in lines) else '"""'
    head = f"def {entry_point}({', '.join(arg_names)}):\n{INDENT}{quote}{lines[0]}"
    if len(lines) == 1:
        return f'{head}"""\n'
    return head + "\n" + "".join((INDENT + line if line else "") + "\n" for line in lines[1:]) + f'{INDENT}"""\n'


def _human_solution(task) -> str:
    from .human import human_rows

    return next((r["solution"] for r in human_rows() if r["task_id"] == task.task_id), "")


def docstring_task(task):
    """`task` (comment style: a BroadTask, or a plain Task of the human split) in docstring style: its prompt the def
    line and docstring, its body (a BroadTask's) the same body without its leading newline, its id + SUFFIX."""
    description, arg_names = parse_comment_prompt(task.prompt)
    body = task.body if isinstance(task, BroadTask) else _human_solution(task)
    description = getattr(task, "description", "") or description
    # the document may not grow past the suite's bound (MAX_BYTES, or a longer human task's own length)
    limit = max(MAX_BYTES, len((task.prompt + body).encode()))
    completion = body[1:] if body.startswith("\n") else body
    example = None
    for case in task.cases:
        call, value = example_text(task.entry_point, case)
        if len(call) + len(value) > EXAMPLE_CHARS or '"""' in call + value:
            continue
        prompt = docstring_prompt(description, task.entry_point, arg_names, (call, value))
        if len((prompt + completion).encode()) <= limit:
            example = (call, value)
            break
    prompt = docstring_prompt(description, task.entry_point, arg_names, example)
    if isinstance(task, BroadTask):
        return replace(task, task_id=task.task_id + SUFFIX, prompt=prompt, body=completion)
    return replace(task, task_id=task.task_id + SUFFIX, prompt=prompt)


def in_docstring_half(task_id: str) -> bool:
    """Whether style `both` renders the task `task_id` in docstring style: the first bit of a hash of its id."""
    return hashlib.blake2b(f"prompt-style:{task_id}".encode(), digest_size=8).digest()[0] >= 128


def styled_tasks(tasks: list, style: str) -> list:
    """`tasks` (comment style, as the suite makes them) in `style`: themselves, each in docstring style, or (`both`)
    each in the style `in_docstring_half` picks for it."""
    if style not in RL_PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}; styles are {', '.join(RL_PROMPT_STYLES)}")
    if style == BOTH:
        return [docstring_task(t) if in_docstring_half(t.task_id) else t for t in tasks]
    return list(tasks) if style == DEFAULT_STYLE else [docstring_task(t) for t in tasks]


def in_docstring_style(seed: int, index: int, share: float) -> bool:
    """Whether pretraining document `index` of seed `seed` is rendered in docstring style: a hash of (seed, index)
    below `share` (so the documents of a smaller share are among those of a larger one)."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(f"docstring-share:{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < share * 2 ** 64


class DocstringMix:
    """A suite's pretraining stream with `share` of its documents in docstring style (`in_docstring_style`)."""

    def __init__(self, stream, share: float):
        self.stream, self.share = stream, share
        self.bucket_steps = stream.bucket_steps

    def pretraining_task(self, index: int, seed: int = 42):
        task = self.stream.pretraining_task(index, seed)
        return docstring_task(task) if in_docstring_style(seed, index, self.share) else task

    def pretraining_text(self, index: int, seed: int = 42) -> str:
        return self.pretraining_task(index, seed).text


def mixed_stream(stream, share: float):
    """`stream` (a Suite) itself at share 0, else its documents mixed with docstring-style ones (DocstringMix)."""
    return DocstringMix(stream, share) if share else stream
