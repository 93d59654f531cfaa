"""`glm53 verify`: judge a JSON Lines file of completions, streaming, in constant memory for any file size.

Each input line holds {"prompt", "completion", "entry_point", "cases": [[args_list, expected], ...]} and may name
its language level ("language": "reference" or "python"; extra keys are kept); each output line is the input row
plus "verdict". `language` (the `--language` flag) sets the level of every row: a row naming another is refused. Rows are read, judged and written a chunk at a
time, and the output appears atomically when every row is done.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterator

from ..runtime.files import atomic_writer, json_text
from .languages import DEFAULT_LANGUAGE, LANGUAGES
from .program import Program
from .verifier import DEFAULT_TIMEOUT_S, SandboxPool, verify_stream

FIELDS = {"prompt": str, "completion": str, "entry_point": str, "cases": list}


def read_rows(path: str | os.PathLike, language: str | None = None) -> Iterator[dict]:
    """Rows of a completions file, checked one by one; a bad row is a ValueError naming its line."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist or is not a file")
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                row = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{where}: not valid JSON ({err})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{where}: each line must be a JSON object")
            for key, kind in FIELDS.items():
                if key not in row:
                    raise ValueError(f"{where}: missing key {key!r} (need {', '.join(FIELDS)})")
                if not isinstance(row[key], kind):
                    raise ValueError(f"{where}: {key!r} must be a {kind.__name__}, got {type(row[key]).__name__}")
            if not row["cases"]:
                raise ValueError(f"{where}: 'cases' is empty; a program is judged against at least one case")
            for k, case in enumerate(row["cases"]):
                if not (isinstance(case, list) and len(case) == 2 and isinstance(case[0], list)):
                    raise ValueError(f"{where}: case {k} must be [args_list, expected]")
            own = row.get("language")
            if own is not None and own not in LANGUAGES:
                raise ValueError(f"{where}: unknown language level {own!r}; choose one of: {', '.join(LANGUAGES)}")
            if language is not None and own is not None and own != language:
                raise ValueError(f"{where}: the row names language {own!r} but --language {language} was given; "
                                 "drop the flag to judge each row at its own level")
            yield row


def verify_file(input_path: str | os.PathLike, out_path: str | os.PathLike, timeout_s: float = DEFAULT_TIMEOUT_S,
                pool: SandboxPool | None = None, language: str | None = None) -> dict[str, int]:
    """Write one verdict per row to `out_path` (never overwriting); returns the count of each status."""
    counts: dict[str, int] = {}
    default = language or DEFAULT_LANGUAGE
    with atomic_writer(out_path) as out:
        rows = iter(read_rows(input_path, language))
        pending: deque[dict] = deque()

        def items():
            for row in rows:
                pending.append(row)
                yield Program.completed(row["prompt"], row["completion"], row["entry_point"], row["cases"],
                                        row.get("language") or default)

        for verdict in verify_stream(items(), timeout_s=timeout_s, pool=pool):
            row = pending.popleft()
            counts[verdict.status] = counts.get(verdict.status, 0) + 1
            out.write(json_text({**row, "verdict": verdict.to_json()}) + "\n")
    return counts
