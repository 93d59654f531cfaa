"""The order, and the diversity, of a pretraining run's generated documents: the pretraining-data questions
(reference-system.md §9.1, §9.2) asked of a task suite's stream instead of the expression miniature's.

A run reads documents 0 .. N-1 of its stream (N: the rows of every step, to the end of the last length-bucketing
window). Two settings change which stream document each of those positions holds, at the same token budget:

    distinct_documents K  diversity: the run cycles over the stream's first K documents, in an order shuffled anew
                          each pass (by seed and pass), instead of reading N new ones (K = 0)
    data_order            stream (as generated: every root function and depth interleaved, the reference);
                          blocked (the same documents grouped by their root function, or family, the groups in an
                          order shuffled by seed: a run sees one function at a time);
                          curriculum (the same documents by depth: every depth-1 function first, then depth 2,
                          then 3; the broad suite, whose tasks have a depth)

Both are pure functions of (seed, N): a step's batch is still known from its index, so a run resumes exactly. A
blocked or curriculum order spans the run, so it changes with the number of steps (a resumed run keeps them).
Length bucketing (pretrain_batches.py) still sorts each window of steps by length, but by group first (root
function or depth), so a batch of a blocked or curriculum run holds one group wherever a window allows: a window
of 8 steps that spans the end of one group and the start of the next holds batches of each.
Simplification: the run's documents are generated once, up front, and kept as text (about 40 s and 20 MB for
the broad preset's 57,600), since a sorted order reads the stream out of its generation order.
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

from .suites import get_suite
from .training_stream import training_stream

DATA_ORDERS = ("stream", "blocked", "curriculum")


def run_documents(steps: int, batch_size: int, bucket_steps: int = 0) -> int:
    """How many documents a run reads: every step's rows, to the end of the last bucketing window."""
    if bucket_steps:
        steps = math.ceil(steps / bucket_steps) * bucket_steps
    return steps * batch_size


def stream_positions(documents: int, distinct: int, seed: int) -> list[int]:
    """The stream index of each of the run's documents before ordering: itself, or with `distinct` K > 0 the
    stream's first K documents, pass after pass, each pass in its own seeded order."""
    if distinct <= 0:
        return list(range(documents))
    positions: list[int] = []
    for run in range(math.ceil(documents / distinct)):
        one_pass = list(range(distinct))
        random.Random(f"distinct-documents:{seed}:{run}").shuffle(one_pass)
        positions.extend(one_pass)
    return positions[:documents]


def order_key(task, order: str):
    """What a run of `order` sorts its documents by (stably: ties keep stream order)."""
    if order == "curriculum":
        return task.depth
    return getattr(task, "root", "") or task.family


def ordered_positions(tasks: list, positions: list[int], order: str, seed: int) -> list[int]:
    """`positions` (the stream indices of `tasks`, one each) in the run's order."""
    if order == "stream":
        return list(positions)
    if order not in DATA_ORDERS:
        raise ValueError(f"unknown data order {order!r}; orders are {', '.join(DATA_ORDERS)}")
    keys = [order_key(task, order) for task in tasks]
    if order == "blocked":
        groups = sorted(set(keys))
        random.Random(f"blocked-order:{seed}").shuffle(groups)
        rank = {g: i for i, g in enumerate(groups)}
        keys = [rank[k] for k in keys]
    return [positions[i] for i in sorted(range(len(tasks)), key=lambda i: (keys[i], i))]


class OrderedStream:
    """A suite's stream as a run of `data_order` and `distinct_documents` reads it: `pretraining_text(i)` is the
    run's document i (0 <= i < documents). The seed passed to it must be the one the order was made with."""

    def __init__(self, stream, seed: int, documents: int, data_order: str = "stream", distinct: int = 0):
        self.stream, self.seed, self.data_order, self.distinct = stream, seed, data_order, distinct
        self.bucket_steps = stream.bucket_steps
        positions = stream_positions(documents, distinct, seed)
        unique = sorted(set(positions))
        tasks = {i: stream.pretraining_task(i, seed) for i in unique}  # in stream order: its block cache holds
        order = ordered_positions([tasks[i] for i in positions], positions, data_order, seed)
        self.positions = order
        self._texts = [tasks[i].text if hasattr(tasks[i], "text") else stream.pretraining_text(i, seed)
                       for i in order]
        keys = [order_key(tasks[i], data_order) for i in order] if data_order != "stream" else [0] * len(order)
        rank = {k: r for r, k in enumerate(dict.fromkeys(keys))}  # groups numbered in the run's order
        self._groups = [rank[k] for k in keys]

    def group(self, index: int) -> int:
        """The group (root function, or depth) of the run's document `index`, numbered in the run's order: length
        bucketing sorts a window by group first, so a batch stays inside one group where the window allows."""
        return self._groups[index]

    def pretraining_text(self, index: int, seed: int) -> str:
        if seed != self.seed:
            raise ValueError(f"this run's document order was made for seed {self.seed}, not {seed}")
        if not 0 <= index < len(self._texts):
            raise IndexError(f"document {index} is outside the run's {len(self._texts)} documents")
        return self._texts[index]


@lru_cache(maxsize=2)
def _ordered_stream(suite: str, seed: int, documents: int, data_order: str, distinct: int,
                    docstring_share: float = 0.0, stream_primitives: str = "",
                    stream_primitives_share: float = 1.0) -> OrderedStream:
    return OrderedStream(training_stream(suite, docstring_share, stream_primitives, stream_primitives_share), seed,
                         documents, data_order, distinct)


def run_stream(cfg) -> OrderedStream | None:
    """A pretraining run's documents (`cfg`: train/pretrain_config.PretrainConfig) in the order `data_order` and
    `distinct_documents` give, made once per process; None for the stream as generated (the reference), which
    pretraining_batch reads directly."""
    if cfg.corpus or (cfg.data_order == "stream" and cfg.distinct_documents == 0):
        return None
    documents = run_documents(cfg.steps, cfg.batch_size * getattr(cfg, "grad_accumulation", 1),
                              get_suite(cfg.suite).bucket_steps)
    return _ordered_stream(cfg.suite, cfg.seed, documents, cfg.data_order, cfg.distinct_documents,
                           getattr(cfg, "docstring_share", 0.0), getattr(cfg, "stream_primitives", ""),
                           getattr(cfg, "stream_primitives_share", 1.0))
