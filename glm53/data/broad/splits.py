"""The broad suite's splits: frozen lists built from fixed seeds, and the unbounded pretraining stream.

    dev, rl, confirm   in distribution: drawn like the stream (other seeds, reserved names)
    compose            each task holds a parent/child primitive pair the stream never puts together
    phrase             each task uses a held-out phrasing (of a primitive, a frame or a style)
    pretrain           the stream: broad_pretraining_task(index, seed), any index

Names: a task's name ends in a 7-letter suffix drawn from (split, index) alone, so the frozen splits' names
(MAX_PER_SPLIT per split) are reserved without generating them; the stream redraws a suffix that is reserved.
Frozen splits are built in order, task i after tasks 0..i-1 (one description map for the whole split), so the
first n tasks of a split are the same for every n. The stream is built in blocks of STREAM_BLOCK documents
that share a description map; any index can be asked for (its block is generated and cached).
Frozen splits are frozen for the built-in registry; a user's extra primitives give other (still seeded) splits.
"""

from __future__ import annotations

import random
from functools import lru_cache

from .task_draw import make_task
from .identifiers import suffix
from .registry import Registry, resolve_registry
from .task import BroadTask

SPLIT_SEEDS = {"dev": 6101, "rl": 6203, "confirm": 6301, "compose": 6421, "phrase": 6529}
SPLIT_MODES = {"dev": "in", "rl": "in", "confirm": "in", "compose": "compose", "phrase": "phrase"}
FROZEN_SPLITS = tuple(SPLIT_SEEDS)
IN_DISTRIBUTION = ("dev", "rl", "confirm")
MAX_PER_SPLIT = 1000
STREAM_BLOCK = 128
DEFAULT_STREAM_SEED = 42


def frozen_suffix(split: str, index: int) -> str:
    return suffix(random.Random(f"broad-name:{split}:{SPLIT_SEEDS[split]}:{index}"))


@lru_cache(maxsize=1)
def reserved_suffixes() -> frozenset[str]:
    """The name suffixes of every frozen split's first MAX_PER_SPLIT tasks."""
    return frozenset(frozen_suffix(split, i) for split in FROZEN_SPLITS for i in range(MAX_PER_SPLIT))


class _SplitBuilder:
    """The tasks of one frozen split made so far, and the description map they share."""

    def __init__(self, split: str, registry: Registry):
        self.split, self.registry = split, registry
        self.tasks: list[BroadTask] = []
        self.conflicts: dict = {}

    def extend_to(self, n: int) -> list[BroadTask]:
        seed = SPLIT_SEEDS[self.split]
        while len(self.tasks) < n:
            i = len(self.tasks)
            self.tasks.append(make_task(self.registry, self.split, f"broad-{self.split}-{i:04d}",
                                        f"{self.split}:{seed}:{i}", frozen_suffix(self.split, i),
                                        SPLIT_MODES[self.split], self.conflicts))
        return self.tasks[:n]


@lru_cache(maxsize=32)
def _builder(split: str, registry: Registry) -> _SplitBuilder:
    return _SplitBuilder(split, registry)


def frozen_broad_tasks(split: str, n: int = 100, registry: Registry | None = None) -> list[BroadTask]:
    """The first n tasks of a frozen split."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown broad split {split!r}; frozen splits are {', '.join(FROZEN_SPLITS)} "
                         "(the pretraining stream is broad_pretraining_task)")
    if not 1 <= n <= MAX_PER_SPLIT:
        raise ValueError(f"n must be in [1, {MAX_PER_SPLIT}], got {n}")
    return list(_builder(split, resolve_registry(registry)).extend_to(n))


def _stream_suffix(seed: int, index: int) -> str:
    reserved, attempt = reserved_suffixes(), 0
    while True:
        candidate = suffix(random.Random(f"broad-name:pretrain:{seed}:{index}:{attempt}"))
        if candidate not in reserved:
            return candidate
        attempt += 1


@lru_cache(maxsize=16)
def _stream_block(block: int, seed: int, registry: Registry) -> tuple[BroadTask, ...]:
    conflicts: dict = {}
    return tuple(make_task(registry, "pretrain", f"broad-pretrain-{i:07d}", f"pretrain:{seed}:{i}",
                           _stream_suffix(seed, i), "in", conflicts)
                 for i in range(block * STREAM_BLOCK, (block + 1) * STREAM_BLOCK))


def broad_pretraining_task(index: int, seed: int = DEFAULT_STREAM_SEED, registry: Registry | None = None) -> BroadTask:
    """Document `index` of the stream: no held-out pair, no held-out phrasing, no reserved name."""
    if index < 0:
        raise ValueError(f"document index must be >= 0, got {index}")
    return _stream_block(index // STREAM_BLOCK, seed, resolve_registry(registry))[index % STREAM_BLOCK]


def broad_pretraining_text(index: int, seed: int = DEFAULT_STREAM_SEED, registry: Registry | None = None) -> str:
    """One pretraining document: prompt + reference body."""
    return broad_pretraining_task(index, seed, registry).text
