"""`glm53 verify`: judge a JSON Lines file of completions, streaming, in constant memory for any file size.

Each input line holds {"prompt", "completion", "entry_point", "cases": [[args_list, expected], ...]} and may name
its language level ("language": "reference" or "python"; extra keys are kept); each output line is the input row
plus "verdict". `language` (the `--language` flag) sets the level of every row: a row naming another is refused.
`-` as the input reads standard input (spooled to a temporary file first, which is removed on every exit path).

Rows are checked before any program runs: a bad row (not JSON, a missing key, an empty or malformed case, a NaN
expected value, an unknown level) is named as `path:line` (1-based). By default every bad row is named in one
line and nothing is written; with `skip_bad_rows` the rest are judged and each bad row gets a `refused` verdict
with its reason, counted in the summary. Rows are read, judged and written a chunk at a time, and the output
appears atomically when every row is done.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Iterator

from ..runtime.files import atomic_writer, json_text
from .languages import DEFAULT_LANGUAGE, LANGUAGES
from .program import Program
from .verifier import DEFAULT_CPU_S, DEFAULT_TIMEOUT_S, SandboxPool, encode_cases, verify_stream

FIELDS = {"prompt": str, "completion": str, "entry_point": str, "cases": list}
STDIN = "-"


def row_problem(line: str, language: str | None) -> tuple[dict | None, str | None]:
    """(row, None) for a good row, or (the row as parsed or None, what is wrong with it)."""
    try:
        row = json.loads(line)
    except ValueError as err:
        return None, f"not valid JSON ({err})"
    if not isinstance(row, dict):
        return None, "each line must be a JSON object"
    for key, kind in FIELDS.items():
        if key not in row:
            return row, f"missing key {key!r} (need {', '.join(FIELDS)})"
        if not isinstance(row[key], kind):
            return row, f"{key!r} must be a {kind.__name__}, got {type(row[key]).__name__}"
    if not row["cases"]:
        return row, "'cases' is empty; a program is judged against at least one case"
    for k, case in enumerate(row["cases"]):
        if not (isinstance(case, list) and len(case) == 2 and isinstance(case[0], list)):
            return row, f"case {k} must be [args_list, expected]"
    own = row.get("language")
    if own is not None and own not in LANGUAGES:
        return row, f"unknown language level {own!r}; choose one of: {', '.join(LANGUAGES)}"
    if language is not None and own is not None and own != language:
        return row, (f"the row names language {own!r} but --language {language} was given; drop the flag to judge "
                     "each row at its own level")
    try:  # what the sandbox cannot represent, or a NaN expected value that no result can equal
        encode_cases([(tuple(a), e) for a, e in row["cases"]], "cases")
    except ValueError as err:
        return row, str(err).removeprefix("cases: ")
    return row, None


def read_rows(path: str | os.PathLike, language: str | None = None, name: str | None = None
              ) -> Iterator[tuple[str, dict | None, str | None]]:
    """(where, row, problem) for each non-blank line, `where` being `name:line` (1-based)."""
    name = str(path) if name is None else name
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if line.strip():
                yield (f"{name}:{lineno}", *row_problem(line, language))


def bad_rows(path: str | os.PathLike, language: str | None = None, name: str | None = None) -> list[str]:
    """`path:line: reason` for every bad row of the file."""
    return [f"{where}: {problem}" for where, _, problem in read_rows(path, language, name) if problem]


def verify_file(input_path: str | os.PathLike, out_path: str | os.PathLike, timeout_s: float = DEFAULT_TIMEOUT_S,
                pool: SandboxPool | None = None, language: str | None = None, cpu_s: float = DEFAULT_CPU_S,
                skip_bad_rows: bool = False) -> dict[str, int]:
    """Write one verdict per row to `out_path` (never overwriting); returns the count of each status (`refused`
    for the bad rows skipped). `input_path` `-` reads standard input."""
    if str(input_path) == STDIN:
        with tempfile.TemporaryDirectory(prefix="glm53-verify-stdin-") as folder:
            spooled = os.path.join(folder, "stdin.jsonl")
            with open(spooled, "w", encoding="utf-8") as f:
                shutil.copyfileobj(sys.stdin, f)
            return _verify_path(spooled, "<stdin>", out_path, timeout_s, pool, language, cpu_s, skip_bad_rows)
    if not os.path.isfile(input_path):
        raise FileNotFoundError(f"{input_path} does not exist or is not a file (give a JSON Lines file, or - to read "
                                "standard input)")
    return _verify_path(input_path, str(input_path), out_path, timeout_s, pool, language, cpu_s, skip_bad_rows)


def _has_rows(path) -> bool:
    with open(path, encoding="utf-8", errors="replace") as f:
        return any(line.strip() for line in f)


def _verify_path(path, name: str, out_path, timeout_s: float, pool, language: str | None, cpu_s: float,
                 skip_bad_rows: bool) -> dict[str, int]:
    if not _has_rows(path):  # an empty input is a mistake (a wrong file, a generation that wrote nothing), said
        # before anything is written rather than answered with an empty verdict file and exit 0
        raise ValueError(f"{name} holds no rows: give JSON Lines with one {{prompt, completion, entry_point, cases}} "
                         "a line (glm53 generate --tasks FILE --out completions.jsonl writes them)")
    if not skip_bad_rows:
        bad = bad_rows(path, language, name)
        if bad:
            raise ValueError(f"{len(bad)} bad row{'s' if len(bad) > 1 else ''}: " + "; ".join(bad)
                             + f". Fix the row{'s' if len(bad) > 1 else ''}, or pass --skip-bad-rows to judge the rest "
                             "and refuse these")
    counts: dict[str, int] = {}
    default = language or DEFAULT_LANGUAGE
    with atomic_writer(out_path) as out:
        pending: deque[tuple[str, dict | None, str | None]] = deque()

        def items():
            for where, row, problem in read_rows(path, language, name):
                pending.append((where, row, problem))
                if problem is None:
                    yield Program.completed(row["prompt"], row["completion"], row["entry_point"], row["cases"],
                                            row.get("language") or default)

        def write_refused():  # bad rows at the head of the queue, in the file's order
            while pending and pending[0][2] is not None:
                where, row, problem = pending.popleft()
                total = len(row["cases"]) if isinstance(row, dict) and isinstance(row.get("cases"), list) else 0
                verdict = {"status": "refused", "passed_cases": 0, "total_cases": total,
                           "message": f"{where}: {problem}", "rule": None}
                body = row if isinstance(row, dict) else {}
                out.write(json_text({**body, "verdict": verdict}) + "\n")
                counts["refused"] = counts.get("refused", 0) + 1

        for verdict in verify_stream(items(), timeout_s=timeout_s, pool=pool, cpu_s=cpu_s):
            write_refused()
            _, row, _ = pending.popleft()
            counts[verdict.status] = counts.get(verdict.status, 0) + 1
            out.write(json_text({**row, "verdict": verdict.to_json()}) + "\n")
        write_refused()
    return counts
