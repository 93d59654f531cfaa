"""Untrusted text in the Markdown the reports write: model completions, task prompts, held-out corpus text.

Such text may hold anything: backticks, `|`, line breaks, `<img src=x onerror=...>`, `<script>`. It goes into a
report only as code, where no renderer (GitHub's, Python-Markdown's on the `glm53 serve` page) reads Markdown or
HTML: `code_span` for a table cell or running text, `code_block` for a block of lines. Text that is not code
(charts.table's plain cells) has `&`, `<` and `>` escaped there.
"""

from __future__ import annotations

import re

NEWLINE_MARK = "\u23ce"  # ⏎: where a line break was, in a one-line code span
_BACKTICKS = re.compile("`+")


class Markdown(str):
    """Text already made safe to put into Markdown as it is (charts.table writes such a cell unchanged)."""

    __slots__ = ()


def _longest_backtick_run(text: str) -> int:
    return max((len(m) for m in _BACKTICKS.findall(text)), default=0)


def code_span(text) -> Markdown:
    """`text` as one inline code span, safe in a Markdown table cell: its fence is a run of backticks longer than any
    run inside (CommonMark's rule: so no backtick in it ends the span), padded with a space where the text begins or
    ends with a backtick or a space; `|` is escaped (GitHub splits a table row at a bare `|` even inside code), and
    line breaks are shown as ⏎ (a cell is one line). Empty text is an empty cell."""
    text = str(text)
    if not text:
        return Markdown("")
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", NEWLINE_MARK).replace("|", "\\|")
    fence = "`" * (_longest_backtick_run(text) + 1)
    pad = " " if text[0] in "` " or text[-1] in "` " else ""
    return Markdown(f"{fence}{pad}{text}{pad}{fence}")


def code_block(text, language: str = "") -> list[str]:
    """`text` as a fenced code block's lines: the fence is at least three backticks and longer than any run of
    backticks inside, so no line of the text closes the block early."""
    text = str(text).replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
    fence = "`" * max(3, _longest_backtick_run(text) + 1)
    return [f"{fence}{language}", text, fence]
