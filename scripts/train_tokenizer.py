"""Build the shipped byte-pair vocabularies (glm53/data/vocabularies/*.json) from the broad stream, and print each
file's sha256 for glm53/data/bpe_tokenizer.py's VOCABULARY_SHA256. Deterministic: the same files every time.

    python scripts/train_tokenizer.py            every vocabulary TOKENIZERS names
    python scripts/train_tokenizer.py --check    rebuild in memory and compare with the shipped files
"""

from __future__ import annotations

import argparse
import hashlib
import sys

from glm53.data.bpe_tokenizer import broad_training_texts, train_bpe, vocabulary_path
from glm53.model.config import TOKENIZERS, tokenizer_vocab_size
from glm53.runtime.files import atomic_write_text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped files instead of writing")
    args = parser.parse_args()
    texts = broad_training_texts()
    status = 0
    for name in TOKENIZERS:
        size = tokenizer_vocab_size(name)
        if size is None:
            continue
        text = train_bpe(texts, size).to_str(pretty=True) + "\n"
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
