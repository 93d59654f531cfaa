"""A pretraining corpus of one's own (`glm53 pretrain --corpus PATH`): read, tokenized, cut into rows, split.

PATH is a folder of `.py` and `.txt` files (found recursively, read in the order of their sorted relative paths; a
symbolic link to a folder is read as its target), a JSON Lines file (`.jsonl`, `.ndjson`, `.json`) whose every
non-blank line is an object with a "text" string, a dataset whose "text" column holds those strings (a folder
`save_to_disk` wrote, DIR:SPLIT of a folder of splits, or a `.parquet` file: glm53/interop/datasets_io.py, the hf
extra), or a single `.py` or `.txt` file (nanoGPT's `input.txt`): one
document stream, whose last share of bytes (from a line's start) is held out, the training part ending without EOS
and the held-out part starting without BOS, with the training part's last id (read, not predicted: the byte before
the cut, or the byte-pair token that ends there), so every byte is a target once, as the stream runs on. Each other
file or row is one document, tokenized as the generated stream is, by the run's tokenizer (tokenizer_for(config.
model)): BOS + tokenizer.encode(text) + EOS; under the byte tokenizer BOS + UTF-8 bytes + EOS (tokenizer.py), read
by a fast path that gives encode's ids. A file with a NUL byte (binary), one that is not UTF-8 and an empty one are
skipped and counted, as are such rows; a JSON Lines line that is not JSON or has no "text" string is refused with
its line number, a dataset row without a "text" string with its row number (named "row N", from 0 as in
`dataset[N]`, where a JSON Lines row is "line N").

Rows follow the generated stream's conventions (pretrain_batches.py) exactly: a row holds one document's ids
and nothing else, right-padded, PAD never a target, so no token attends to or predicts across a document
boundary. A document longer than a row is split into pieces of sequence_length + 1 ids that overlap by one
(the last id of a piece is the first input of the next), so every id after BOS is a target exactly once; a
continuation row starts without BOS and without the context before it. The price of never mixing documents in a
row is the padding of each document's last row (`padding_fraction` in the summary).

Held out by document: a document goes to validation when a hash of its key (a file's relative path; a JSON Lines
or dataset row's text, so identical rows land together) falls below the share. The choice depends on that document
alone, so adding files moves no other document between the sets, and it does not depend on the seed. A corpus whose
hashes hold out nothing (a few documents) holds out its lowest-hashed one, so a validation loss exists.

Training order: corpus row g (counting corpus rows only, over the whole run) is row order(seed, g // N)[g % N] of
the N training rows, a permutation per epoch: a pure function of (seed, g), so a resumed run needs no loader
state. The held-out documents and these rules are the same under every tokenizer; only the ids, and so the rows,
differ. The summary counts both bytes and tokens.
Simplification: the whole corpus is held in memory (two bytes an id, so a vocabulary of at most 2^15 ids), which
suits megabytes, not gigabytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from ..runtime.providers import provider
from .pretrain_batches import IGNORE_INDEX
from .tokenizer import BOS_ID, BYTE_OFFSET, EOS_ID, PAD_ID, ByteTokenizer

TEXT_SUFFIXES = (".py", ".txt")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
SKIP_REASONS = ("binary", "not_utf8", "empty")
MAX_VOCABULARY = 2 ** 15  # ids are held as int16
FORMS = ("a folder of .py/.txt files, a JSON Lines file, a dataset (a folder save_to_disk wrote, DIR:SPLIT of a "
         "folder of splits, or a .parquet file) or one .py/.txt file")  # what --corpus reads


@dataclass(frozen=True)
class Document:
    name: str  # what the sha256 names it by: its relative path, or "line N" of a JSON Lines file
    key: str  # what decides held-out: the relative path, or a row's text
    data: bytes  # UTF-8
    bos: bool = True  # False: a single file's held-out part, which continues the stream
    eos: bool = True  # False: a single file's training part, which the stream continues


def _unit_hash(text: str, salt: str) -> float:
    """A number in [0, 1) fixed by `text` alone (sha256, so the same on every machine and Python)."""
    digest = hashlib.sha256(f"{salt}\0{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def _row_order_keys(key: str, rows: int, salt: str = "glm53-validation-order") -> list[float]:
    """`_unit_hash(f"{key}\0{k}", salt)` for k = 0 .. rows - 1, the key hashed once: sha256's state after the
    shared prefix is copied for each row, so a document costs its length once, not once per row (a 5 MB JSON Lines
    row, whose key is its text, took minutes hashed per row)."""
    prefix = hashlib.sha256(f"{salt}\0{key}\0".encode("utf-8", "surrogatepass"))
    keys = []
    for k in range(rows):
        digest = prefix.copy()
        digest.update(str(k).encode("ascii"))
        keys.append(int.from_bytes(digest.digest()[:8], "big") / 2 ** 64)
    return keys


def _usable(data: bytes) -> str | None:
    """Why a document's bytes are skipped (one of SKIP_REASONS), or None when it is usable."""
    if b"\0" in data:
        return "binary"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "not_utf8"
    return "empty" if not data else None


def _folder_files(root: Path) -> list[tuple[str, Path]]:
    """(relative path, path) of every .py/.txt file under `root`, sorted, following symbolic links to folders (a
    corpus is often a folder of links to the sources one has) but entering each real folder once, so a link to a
    folder above it is no loop."""
    found, seen = [], set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            subfolders[:] = []
            continue
        seen.add(real)
        subfolders.sort()
        for name in names:
            path = Path(folder) / name
            if path.suffix in TEXT_SUFFIXES and path.is_file():
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def _folder_documents(root: Path, skipped: dict) -> list[Document]:
    files = _folder_files(root)
    documents = []
    for name, path in files:
        data = path.read_bytes()
        reason = _usable(data)
        if reason:
            skipped[reason] += 1
        else:
            documents.append(Document(name, name, data))
    return documents


def _jsonl_documents(path: Path, where: str, skipped: dict) -> list[Document]:
    documents = []
    with open(path, "rb") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue  # a blank line (a trailing newline) is no row
            try:
                row = json.loads(line)
            except ValueError as err:  # JSONDecodeError and UnicodeDecodeError both
                raise ValueError(f"{where}: line {number} is not JSON ({getattr(err, 'msg', err)}); each line must "
                                 'be an object with a "text" string') from None
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise ValueError(f'{where}: line {number} has no "text" string; each line must be an object with a '
                                 '"text" string, such as {"text": "def f(x):\\n    return x\\n"}')
            _add_text(documents, f"line {number}", row["text"], skipped)
    return documents


def _dataset_documents(rows: list[tuple[str, object]], where: str, skipped: dict) -> list[Document]:
    """The documents of a dataset's "text" column (glm53/interop/datasets_io.py read it), each row one."""
    documents = []
    for name, text in rows:
        if not isinstance(text, str):
            held = "null" if text is None else f"a {type(text).__name__}"
            raise ValueError(f'{where}: {name} has no "text" string (it is {held}); each row\'s "text" must be a '
                             "string, as a JSON Lines corpus's are")
        _add_text(documents, name, text, skipped)
    return documents


def _add_text(documents: list[Document], name: str, text: str, skipped: dict) -> None:
    """A row's text as a document (its key the text itself), or counted among the skipped."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate written as a JSON escape: no UTF-8 text
        skipped["not_utf8"] += 1
        return
    reason = _usable(data)
    if reason:
        skipped[reason] += 1
    else:
        documents.append(Document(name, text, data))


@dataclass
class RowSet:
    """Rows of `sequence_length` + 1 ids, each a slice (start, length) of one flat tensor of ids."""
    tokens: torch.Tensor  # int16, every document's BOS + ids + EOS end to end
    starts: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    order_keys: list[float] = field(default_factory=list)  # validation: which rows come first (seed-independent)

    def __len__(self) -> int:
        return len(self.starts)

    def batch(self, indices, sequence_length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows `indices` -> (inputs, labels) [n, sequence_length], PAD labels -100, as encode_documents makes."""
        rows = torch.full((len(indices), sequence_length + 1), PAD_ID, dtype=torch.long)
        for r, i in enumerate(indices):
            start, length = self.starts[i], self.lengths[i]
            rows[r, :length] = self.tokens[start:start + length]
        labels = rows[:, 1:].clone()
        labels[labels == PAD_ID] = IGNORE_INDEX
        return rows[:, :-1].clone(), labels


def document_ids(doc: Document, tokenizer=None) -> torch.Tensor:
    """A document's ids, int16: BOS (unless it continues a stream) + tokenizer.encode(text) + EOS (unless the stream
    continues it). The byte tokenizer's (the default) are read straight from the bytes: the same ids as
    ByteTokenizer.encode, without a Python int a byte."""
    if tokenizer is None or isinstance(tokenizer, ByteTokenizer):
        ids = torch.frombuffer(bytearray(doc.data), dtype=torch.uint8).to(torch.int16) + BYTE_OFFSET
    else:
        ids = torch.tensor(tokenizer.encode(doc.data.decode("utf-8", errors="surrogatepass")), dtype=torch.int16)
    return torch.cat([torch.tensor([BOS_ID] if doc.bos else [], dtype=torch.int16), ids,
                      torch.tensor([EOS_ID] if doc.eos else [], dtype=torch.int16)])


def _rows(documents: list[Document], sequence_length: int, tokenizer=None,
          ids: list[torch.Tensor] | None = None) -> RowSet:
    """Every document's ids (`ids`, else document_ids under `tokenizer`), cut into overlapping pieces of at most
    sequence_length + 1 ids (module docstring)."""
    pieces, offset = ids if ids is not None else [document_ids(doc, tokenizer) for doc in documents], 0
    rows = RowSet(torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.int16))
    for doc, piece in zip(documents, pieces):
        starts = range(0, len(piece) - 1, sequence_length)
        for start in starts:
            rows.starts.append(offset + start)
            rows.lengths.append(min(sequence_length + 1, len(piece) - start))
        rows.order_keys += _row_order_keys(doc.key, len(starts))
        offset += len(piece)
    return rows


def token_bytes(ids, tokenizer=None) -> bytes:
    """The bytes `ids` stand for (specials: none), whole tokens, not decoded, so a cut UTF-8 character stays cut."""
    table = getattr(tokenizer, "id_bytes", None)  # a byte-pair tokenizer's table
    if table is None:
        return bytes(t - BYTE_OFFSET for t in ids if BYTE_OFFSET <= t < BYTE_OFFSET + 256)
    return b"".join(table[t] for t in ids)


@lru_cache(maxsize=4)
def _epoch_order(rows: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(rows))
    random.Random(f"corpus-order:{seed}:{epoch}").shuffle(order)
    return tuple(order)


@dataclass
class Corpus:
    """A corpus read and split: its training and validation rows, and what the receipt records of it."""
    train: RowSet
    validation: RowSet
    summary: dict
    sequence_length: int
    heldout: frozenset[str]  # the names of the held-out documents
    tokenizer: object = None  # the run's (bpe_tokenizer.Tokenizer); None: bytes

    def training_batch(self, first: int, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Corpus rows first .. first + count - 1 of the run's order (module docstring)."""
        n = len(self.train)
        picks = [_epoch_order(n, seed, g // n)[g % n] for g in range(first, first + count)]
        return self.train.batch(picks, self.sequence_length)

    def describe(self, mix: float) -> str:
        """The log line a run starts with."""
        c = self.summary
        return (f"corpus {c['path']}: {c['documents']} documents, {c['bytes']:,} bytes, {c['tokens']:,} "
                f"{c['tokenizer']} tokens ({c['skipped']} files or rows "
                f"skipped), {c['validation_documents']} held out; {c['train_rows']} training rows, "
                f"{c['padding_fraction']:.1%} padding; {mix:g} of each step's rows")

    def sample_prompts(self, count: int, prompt_bytes: int = 48) -> list[str]:
        """The first bytes (at most `prompt_bytes`, whole UTF-8 characters; in a row that continues a document, from
        its first line's start when it has one) of up to `count` held-out rows, those that start a document first,
        each group in the fixed hash order: the prompts a corpus run's checkpoints complete."""
        rows = self.validation
        order = sorted(range(len(rows)), key=lambda i: (int(rows.tokens[rows.starts[i]]) != BOS_ID, rows.order_keys[i]))
        prompts = []
        for i in order[:count]:
            ids = rows.tokens[rows.starts[i]:rows.starts[i] + rows.lengths[i]].tolist()
            data = token_bytes(ids, self.tokenizer)
            line = data.find(b"\n") + 1
            if ids[0] != BOS_ID and 0 < line < len(data):
                data = data[line:]
            data = data[:prompt_bytes]
            prompts.append(data.decode("utf-8", errors="ignore"))
        return [p for p in prompts if p]

    def validation_batch(self, limit: int) -> tuple[torch.Tensor, torch.Tensor]:
        """At most `limit` held-out rows: all of them, or those first in a fixed hash order (the same every run)."""
        picks = sorted(range(len(self.validation)), key=lambda i: self.validation.order_keys[i])[:limit]
        return self.validation.batch(sorted(picks), self.sequence_length)


def read_documents(path: str) -> tuple[list[Document], dict, str]:
    """(usable documents, skipped counts by reason, "folder", "jsonl", "file", "datasets" or "parquet"); a path that
    is none of them, and a bad JSON Lines line or dataset row, are one-line ValueErrors. A dataset (a folder
    `save_to_disk` wrote, DIR:SPLIT of a folder of splits, or a .parquet file) is read by
    glm53/interop/datasets_io.py, a floor above, asked for by role."""
    where, source = f"--corpus {path}", Path(path)
    skipped = dict.fromkeys(SKIP_REASONS, 0)
    dataset = provider("texts from a dataset")(path)  # None: not a dataset
    if dataset is not None:
        rows, kind = dataset
        return _dataset_documents(rows, where, skipped), skipped, kind
    if source.is_dir():
        return _folder_documents(source, skipped), skipped, "folder"
    if not source.exists():
        raise ValueError(f"{where} does not exist; give {FORMS}")
    if source.suffix in TEXT_SUFFIXES:
        data = source.read_bytes()
        reason = _usable(data)
        if reason:
            skipped[reason] += 1
        return ([] if reason else [Document(source.name, source.name, data)]), skipped, "file"
    if source.suffix not in JSONL_SUFFIXES:
        raise ValueError(f"{where} is neither JSON Lines ({', '.join(JSONL_SUFFIXES)}) nor a .py/.txt file; give "
                         f"{FORMS}")
    return _jsonl_documents(source, where, skipped), skipped, "jsonl"


def _split_stream(doc: Document, validation_share: float) -> tuple[list[Document], set[str]]:
    """A single file's stream cut in two at the start of the line nearest the last `validation_share` of its bytes
    (at that byte when it has one line): the training part and the held-out part (none for a file of one byte)."""
    if len(doc.data) < 2:
        return [doc], set()
    target = max(1, min(len(doc.data) - 1, round(len(doc.data) * (1 - validation_share))))
    line = doc.data.rfind(b"\n", 0, target) + 1
    cut = line if line > 0 else target
    while cut < len(doc.data) and (doc.data[cut] & 0xC0) == 0x80:  # not inside a UTF-8 character
        cut += 1
    if cut >= len(doc.data):
        return [doc], set()
    head = Document(f"{doc.name} [:{cut}]", f"{doc.key} [:{cut}]", doc.data[:cut], eos=False)
    tail = Document(f"{doc.name} [{cut}:]", f"{doc.key} [{cut}:]", doc.data[cut - 1:], bos=False)
    return [head, tail], {tail.name}


def _documents_ids(documents: list[Document], tokenizer) -> list[torch.Tensor]:
    """Each document's ids (document_ids); a held-out stream part (no BOS), which follows its training part, starts
    with that part's last id, read and not predicted, then its own text after its first byte (the byte before the
    cut, which that id ends with), so every byte is a target once under any tokenizer. Under the byte tokenizer
    that first id is that byte: the same ids as document_ids of the part."""
    ids = []
    for doc in documents:
        if doc.bos or not ids:
            ids.append(document_ids(doc, tokenizer))
        else:
            rest = Document(doc.name, doc.key, doc.data[1:], bos=False, eos=doc.eos)
            ids.append(torch.cat([ids[-1][-1:], document_ids(rest, tokenizer)]))
    return ids


def load_corpus(path: str, validation_share: float, sequence_length: int, tokenizer=None) -> Corpus:
    """Read, split by document, tokenize with `tokenizer` (the run's: bpe_tokenizer.tokenizer_for(config.model);
    None: bytes) and cut into rows; an empty corpus, or one left with no training document, is a one-line
    ValueError (raised before anything is written)."""
    where = f"--corpus {path}"
    if tokenizer is not None and tokenizer.vocab_size > MAX_VOCABULARY:
        raise ValueError(f"{where}: tokenizer {getattr(tokenizer, 'name', '?')} has {tokenizer.vocab_size} ids, more "
                         f"than the {MAX_VOCABULARY} a corpus holds (int16); use a smaller vocabulary")
    documents, skipped, kind = read_documents(path)
    if not documents:
        raise ValueError(f"{where} holds no usable document ({sum(skipped.values())} skipped: "
                         f"{', '.join(f'{k} {v}' for k, v in skipped.items())}); it needs .py/.txt files "
                         "(or JSON Lines rows) of non-empty UTF-8 text")
    if kind == "file":
        documents, heldout = _split_stream(documents[0], validation_share)
    else:
        position = {d.name: _unit_hash(d.key, "glm53-heldout") for d in documents}
        heldout = {name for name, u in position.items() if u < validation_share}
        if not heldout and len(documents) > 1:  # the lowest-hashed key instead (with any rows identical to it)
            heldout = {name for name, u in position.items() if u == min(position.values())}
    train = [d for d in documents if d.name not in heldout]
    if not train:
        raise ValueError(f"{where}: all {len(documents)} usable documents fall in the held-out share; lower "
                         f"--corpus-validation-share or add documents")
    validation = [d for d in documents if d.name in heldout]
    digest = hashlib.sha256()
    for doc in documents:  # names have no NUL; the length fixes where each content ends
        digest.update(doc.name.encode("utf-8", "surrogatepass") + b"\0" + len(doc.data).to_bytes(8, "big") + doc.data)
    ids = dict(zip((d.name for d in documents), _documents_ids(documents, tokenizer)))
    train_ids, validation_ids = [ids[d.name] for d in train], [ids[d.name] for d in validation]
    train_rows = _rows(train, sequence_length, ids=train_ids)
    validation_rows = _rows(validation, sequence_length, ids=validation_ids)
    # each id once: a held-out stream part's first id is its training part's last
    validation_tokens = sum(len(i) for i in validation_ids) - sum(not d.bos for d in validation)
    slots = (len(train_rows) + len(validation_rows)) * sequence_length
    targets = sum(train_rows.lengths) + sum(validation_rows.lengths) - len(train_rows) - len(validation_rows)
    summary = {
        "path": str(Path(path).resolve()), "format": kind, "sha256": digest.hexdigest(),
        "documents": len(documents), "bytes": sum(len(d.data) for d in documents),
        "train_documents": len(train), "validation_documents": len(validation),
        "validation_bytes": sum(len(d.data) for d in validation), "validation_share": validation_share,
        "tokenizer": getattr(tokenizer, "name", "byte"),
        "tokens": sum(len(i) for i in train_ids) + validation_tokens, "validation_tokens": validation_tokens,
        "train_rows": len(train_rows), "validation_rows": len(validation_rows),
        "padding_fraction": 1 - targets / slots, "skipped": sum(skipped.values()), "skipped_by_reason": skipped,
    }
    return Corpus(train_rows, validation_rows, summary, sequence_length, frozenset(heldout), tokenizer)
