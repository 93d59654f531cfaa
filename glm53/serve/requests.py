"""A request's body made into a `Job`, or refused with one sentence naming the field and what it takes.

A prompt comes one of three ways: a description and a signature (made into the tasks' own prompt form,
data/tasks.py PROMPT_TEMPLATE), a whole prompt (its last `def NAME(` line is the function the cases call), or a
task of a frozen split (its prompt, entry point and cases). Cases typed by the user are `args -> expected`, one a
line, `args` written as between the parentheses of a call (`1, 2 -> 3` calls f(1, 2); `[1, 2] -> 3` calls
f([1, 2])), each side a Python literal. Sampling is `glm53 generate`'s: greedy by default, seed 0, the token cap
and stop rule of the checkpoint's suite.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace

from ..data.tasks import PROMPT_TEMPLATE
from ..data.bpe_tokenizer import tokenizer_for
from ..decode.sampling import Sampling
from ..verify.verifier import encode_cases
from .generation import Job
from .serve_config import ServeConfig

MODES = ("description", "prompt", "task")
FIELDS = {"mode", "description", "signature", "prompt", "split", "task_id", "cases", "checkpoints", "max_new_tokens",
          "temperature", "top_k", "top_p", "seed"}
MAX_CASE_CHARS = 500
MAX_SEED = 2**63 - 1
MAX_TEMPERATURE = 100.0  # beyond ~100 sampling is uniform already (decode/sampling.py)
SIGNATURE = re.compile(r"([A-Za-z_]\w*)\s*\(([^()]*)\)\s*:?\s*")
DEF_LINE = re.compile(r"^[ \t]*def[ \t]+([A-Za-z_]\w*)[ \t]*\(", re.MULTILINE)


class BadRequest(ValueError):
    """A request past a bound or malformed: its message is the one sentence the page shows (status 400, or 413
    for a body too long)."""

    def __init__(self, sentence: str, status: int = 400):
        super().__init__(sentence)
        self.status = status


def _text(body: dict, name: str, limit: int, required: bool = True) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise BadRequest(f"give {name} as non-empty text")
    if len(value) > limit:
        raise BadRequest(f"{name} is {len(value):,} characters; at most {limit:,} are accepted", 413)
    return value


def _int(body: dict, name: str, low: int, high: int, default: int | None) -> int | None:
    value = body.get(name, default)
    if value is None:
        return None
    if type(value) is not int or not low <= value <= high:
        raise BadRequest(f"{name} must be a whole number from {low} to {high:,}, got {value!r}")
    return value


def _float(body: dict, name: str, low: float, high: float, default: float | None, low_open: bool = False):
    value = body.get(name, default)
    if value is None:
        return None
    if type(value) not in (int, float) or not (low < value if low_open else low <= value) or not value <= high:
        bound = f"above {low} and at most {high}" if low_open else f"from {low} to {high}"
        raise BadRequest(f"{name} must be a number {bound}, got {value!r}")
    return float(value)


def parse_cases(text: str, max_cases: int) -> tuple:
    """`args -> expected` lines (blank lines skipped) -> ((args list, expected), ...), or BadRequest naming the line."""
    lines = [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if len(lines) > max_cases:
        raise BadRequest(f"{len(lines)} test cases were given; at most {max_cases} are accepted", 413)
    cases = []
    for n, line in lines:
        if len(line) > MAX_CASE_CHARS:
            raise BadRequest(f"case line {n} is {len(line):,} characters; at most {MAX_CASE_CHARS} are accepted", 413)
        case = _parse_case(n, line)
        try:
            encode_cases([case], "a case")  # what the sandbox can carry: the verifier's own check
        except ValueError as err:  # "a case: case 0: the expected value: ..."
            raise BadRequest(f"case line {n}: {str(err).split(': ', 2)[-1]}") from None
        cases.append(case)
    return tuple(cases)


def _parse_case(n: int, line: str) -> tuple:
    for split in [m.start() for m in re.finditer("->", line)]:
        left, right = line[:split].strip(), line[split + 2:].strip()
        try:
            call = ast.parse(f"f({left})", mode="eval").body
            if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
                continue
            return [ast.literal_eval(a) for a in call.args], ast.literal_eval(right)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
    raise BadRequest(f"case line {n} is not `args -> expected` with Python literals on both sides "
                     f"(for example `3, 4 -> 7`): {line[:60]!r}")


def _prompt(body: dict, cfg: ServeConfig, tasks) -> tuple[str, str | None, tuple]:
    """(prompt, entry point or None, the task's cases or ())."""
    mode = body.get("mode", "description")
    if mode not in MODES:
        raise BadRequest(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "description":
        description = _text(body, "description", cfg.max_prompt_chars)
        if "\n" in description or "\r" in description:
            raise BadRequest("description must be one line (the prompt form is one comment line); use mode prompt "
                             "for a prompt of several lines")
        signature = _text(body, "signature", 200)
        match = SIGNATURE.fullmatch(signature.strip())
        if not match:
            raise BadRequest(f"signature must read like name(x) or name(a, b), got {signature[:60]!r}")
        prompt = PROMPT_TEMPLATE.format(description=description.strip(), entry_point=match[1], arg=match[2].strip())
        return prompt, match[1], ()
    if mode == "prompt":
        prompt = _text(body, "prompt", cfg.max_prompt_chars)
        opened = DEF_LINE.findall(prompt)
        return prompt, (opened[-1] if opened else None), ()
    split, task_id = _text(body, "split", 40), _text(body, "task_id", 200)
    task = tasks(split).get(task_id)
    if task is None:
        raise BadRequest(f"no task {task_id!r} in split {split!r}; pick one from the list", 404)
    return task.prompt, task.entry_point, tuple(task.cases)


def parse_job(body, cfg: ServeConfig, served: list, tasks) -> Job:
    """The Job a request body asks for. `tasks(split)` -> {task_id: Task} of the first checkpoint's suite."""
    if not isinstance(body, dict):
        raise BadRequest("send a JSON object (see the page for its fields)")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; the fields are {', '.join(sorted(FIELDS))}")
    prompt, entry_point, cases = _prompt(body, cfg, tasks)
    if len(prompt) > cfg.max_prompt_chars:
        raise BadRequest(f"the prompt is {len(prompt):,} characters; at most {cfg.max_prompt_chars:,} are accepted",
                         413)
    typed = _text(body, "cases", cfg.max_cases * (MAX_CASE_CHARS + 1), required=False)
    if typed is not None and typed.strip():
        if entry_point is None:
            raise BadRequest("the prompt opens no function (no `def NAME(` line), so the cases have nothing to call")
        cases = parse_cases(typed, cfg.max_cases)
    elif len(cases) > cfg.max_cases:
        cases = cases[: cfg.max_cases]
    chosen = body.get("checkpoints", list(range(len(served))))
    if (not isinstance(chosen, list) or not chosen or len(chosen) > len(served) or len(set(chosen)) != len(chosen)
            or any(type(i) is not int or not 0 <= i < len(served) for i in chosen)):
        raise BadRequest(f"checkpoints must list distinct indices of served checkpoints, from 0 to {len(served) - 1}, "
                         f"got {chosen!r}")
    suite = served[chosen[0]].suite
    cap = _int(body, "max_new_tokens", 1, cfg.max_new_tokens, suite.max_new_tokens)
    for i in chosen:
        config = served[i].model.config
        context, length = config.max_sequence_length, len(tokenizer_for(config).encode(prompt, bos=True))
        if length >= context:
            raise BadRequest(f"the prompt is {length} tokens with BOS; {served[i].name} holds {context} in its "
                             "context, so no byte would fit: shorten it", 413)
    sampling = replace(Sampling(), max_new_tokens=cap,
                       temperature=_float(body, "temperature", 0.0, MAX_TEMPERATURE, 0.0),
                       top_k=_int(body, "top_k", 1, 1 << 20, None),
                       top_p=_float(body, "top_p", 0.0, 1.0, None, low_open=True))
    seed = _int(body, "seed", 0, MAX_SEED, 0)
    return Job(prompt, entry_point, cases, tuple(chosen), sampling, seed)
