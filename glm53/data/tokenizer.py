"""Byte-level tokenizer: 4 special ids, then the 256 byte values, then 3 reserved image ids.

Simplification vs GLM-5.3-Flash: the released model uses a large BPE vocabulary. A byte vocabulary keeps
the embedding tiny (260 x 192), needs no training, and makes every Python string representable.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

PAD_ID, BOS_ID, EOS_ID, SEP_ID = 0, 1, 2, 3
BYTE_OFFSET = 4
BYTE_VOCAB_SIZE = BYTE_OFFSET + 256  # 260: what the language model predicts
IMAGE_START_ID, IMAGE_PLACEHOLDER_ID, IMAGE_END_ID = 260, 261, 262
IMAGE_IDS = (IMAGE_START_ID, IMAGE_PLACEHOLDER_ID, IMAGE_END_ID)
FULL_VOCAB_SIZE = 263  # byte vocabulary plus the reserved image ids


def _surrogate_or_replace(err: UnicodeDecodeError) -> tuple[str, int]:
    """Decode error handler: a UTF-8-encoded lone surrogate (which `encode` writes for strings that hold one)
    comes back as that surrogate, so the round trip is exact for every str; any other bad byte becomes U+FFFD."""
    chunk = err.object[err.start : err.start + 3]
    if len(chunk) == 3 and chunk[0] == 0xED and 0xA0 <= chunk[1] <= 0xBF and 0x80 <= chunk[2] <= 0xBF:
        return chunk.decode("utf-8", errors="surrogatepass"), err.start + 3
    return "\ufffd", err.end


codecs.register_error("glm53_surrogate_or_replace", _surrogate_or_replace)


class ByteTokenizer:
    """UTF-8 bytes shifted by 4. No merges, so `def increment(x):` is 17 tokens.

    `decode` is total over every list of in-range ids: it stops at the first EOS, skips specials and image
    ids, and replaces invalid UTF-8 with U+FFFD. Only an id outside [0, 263) raises.
    """

    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    sep_id = SEP_ID
    vocab_size = BYTE_VOCAB_SIZE
    # Ids generation must never emit: padding, BOS, SEP and the image markers (EOS stays allowed).
    banned_generation_ids = (PAD_ID, BOS_ID, SEP_ID) + IMAGE_IDS

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}; decode bytes to str first")
        ids = [b + BYTE_OFFSET for b in text.encode("utf-8", errors="surrogatepass")]
        if bos:
            ids.insert(0, BOS_ID)
        if eos:
            ids.append(EOS_ID)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        out = bytearray()
        for position, raw in enumerate(ids):
            i = int(raw)
            if not 0 <= i < FULL_VOCAB_SIZE:
                raise ValueError(
                    f"token id {i} at position {position} is outside the vocabulary [0, {FULL_VOCAB_SIZE}); "
                    f"ids 0-3 are specials, 4-259 bytes, 260-262 image markers"
                )
            if i == EOS_ID:
                break
            if BYTE_OFFSET <= i < BYTE_VOCAB_SIZE:
                out.append(i - BYTE_OFFSET)
        return out.decode("utf-8", errors="glm53_surrogate_or_replace")
