"""glm53's tokenizers as one `tokenizer.json` that transformers' PreTrainedTokenizerFast loads, giving glm53's ids.

Both kinds become the same thing, a byte-level byte-pair model of the `tokenizers` library:
- a byte-pair vocabulary (broad-bpe-*, code-bpe-2048) is its shipped file, with the byte-to-character step that
  glm53 does in Python (`as_byte_chars`) moved into the file as a ByteLevel pre-tokenizer (no regex, no prefix
  space). Its alphabet is the usual byte-level one, which is glm53's BYTE_CHARS, so the pieces are the same.
- the byte tokenizer is a byte-pair model with no merges: the 4 specials, then the 256 byte characters at ids 4-259,
  which is ByteTokenizer's table exactly. The issue asked for a small tokenizer class of our own here; a
  merge-free byte-pair model gives the same ids and loads with `AutoTokenizer` without remote code, so we chose it.

A post-processor puts BOS first, as glm53 encodes every prompt (`encode(prompt, bos=True)`), so `tokenizer(text)`
and `pipeline("text-generation")` feed the model what glm53 feeds it. Special ids are glm53's: PAD 0, BOS 1, EOS 2,
SEP 3.

Not carried: a str holding a lone surrogate (glm53's tokenizers keep it as its three bytes; Rust strings cannot hold
one, so transformers' tokenizer refuses such text), and glm53's decoding of the specials (it stops at EOS; the fast
tokenizer's `decode(..., skip_special_tokens=True)` skips them instead, which is the same text up to the first EOS).
"""

from __future__ import annotations

import json

import tokenizers as hf

from ..data.bpe_tokenizer import BYTE_CHARS, NEWLINE_BEHAVIOR, NEWLINE_CHAR, SPECIAL_TOKENS, family, vocabulary_path
from ..data.tokenizer import BOS_ID, BYTE_OFFSET, BYTE_VOCAB_SIZE, EOS_ID, PAD_ID, SEP_ID

PAD, BOS, EOS, SEP = SPECIAL_TOKENS


def _byte_tokenizer() -> hf.Tokenizer:
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    vocab.update({char: BYTE_OFFSET + b for b, char in enumerate(BYTE_CHARS)})
    tokenizer = hf.Tokenizer(hf.models.BPE(vocab=vocab, merges=[]))
    tokenizer.add_special_tokens(list(SPECIAL_TOKENS))
    return tokenizer


def hf_tokenizer(name: str) -> hf.Tokenizer:
    """The `tokenizers` object of glm53 tokenizer `name` with the byte-level step and BOS inside it."""
    if name == "byte":
        tokenizer, split = _byte_tokenizer(), None
    else:
        tokenizer = hf.Tokenizer.from_str(vocabulary_path(name).read_text())
        split = hf.pre_tokenizers.Split(hf.Regex(NEWLINE_CHAR), behavior=NEWLINE_BEHAVIOR[family(name)])
    byte_level = hf.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.pre_tokenizer = byte_level if split is None else hf.pre_tokenizers.Sequence([byte_level, split])
    tokenizer.decoder = hf.decoders.ByteLevel()
    tokenizer.post_processor = hf.processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, BOS_ID)])
    # "<eos>" typed in a text is five bytes, as in glm53: special ids come only from the post-processor and the model
    tokenizer.encode_special_tokens = True
    return tokenizer


def tokenizer_files(name: str, model_max_length: int) -> dict[str, str]:
    """The files of a transformers tokenizer folder: tokenizer.json, tokenizer_config.json, special_tokens_map.json."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS, "pad_token": PAD,
              "sep_token": SEP, "model_max_length": model_max_length, "clean_up_tokenization_spaces": False,
              "add_bos_token": True, "padding_side": "left", "split_special_tokens": True,
              "glm53_tokenizer": name}
    special = {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD, "sep_token": SEP}
    return {"tokenizer.json": hf_tokenizer(name).to_str(pretty=True),
            "tokenizer_config.json": json.dumps(config, indent=2),
            "special_tokens_map.json": json.dumps(special, indent=2)}


# the ids a tokenizer's vocabulary ends at for the model: the byte tokenizer's language model predicts 260 symbols
TEXT_VOCAB_SIZE = {"byte": BYTE_VOCAB_SIZE}
SPECIAL_IDS = {"pad_token_id": PAD_ID, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "sep_token_id": SEP_ID}
