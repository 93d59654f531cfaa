"""Pretraining batches: one generated function per row, BOS + bytes + EOS, right-padded, PAD never a target.

Row r of step t (0-based) is document t * batch_size + r, so the data order is a pure function of the seed
and the step: resuming at step t needs no data-loader state. No packing, as in the reference. The documents
come from a task suite's stream (glm53/data/suites.py; the reference suite's by default).

A suite with `bucket_steps` (the broad suite: 8; its documents run from about 60 to 322 tokens) batches by length
instead: the documents of steps [w * 8, w * 8 + 8) are sorted by length and cut into 8 batches, which those steps
take in an order shuffled by (seed, w), and each batch is cut to its longest row. The same documents are seen,
in another order, at about 60% of the cost of padding every row to sequence_length (no row attends to another,
and PAD is never a target, so a row's loss does not depend on its padding). Still a pure function of the step.
"""

from __future__ import annotations

import random

import torch

from .suites import DEFAULT_SUITE, get_suite
from .tokenizer import ByteTokenizer

IGNORE_INDEX = -100


def encode_documents(texts: list[str], sequence_length: int, tokenizer: ByteTokenizer | None = None):
    """texts -> (inputs [B, sequence_length], labels [B, sequence_length]) with PAD labels set to -100."""
    tokenizer = tokenizer or ByteTokenizer()
    rows = torch.full((len(texts), sequence_length + 1), tokenizer.pad_id, dtype=torch.long)
    for r, text in enumerate(texts):
        ids = tokenizer.encode(text, bos=True, eos=True)
        if len(ids) > sequence_length + 1:
            raise ValueError(f"document {r} is {len(ids)} tokens with BOS/EOS, longer than sequence_length + 1 = "
                             f"{sequence_length + 1}; raise --sequence-length")
        rows[r, : len(ids)] = torch.tensor(ids)
    inputs = rows[:, :-1].clone()
    labels = rows[:, 1:].clone()
    labels[labels == tokenizer.pad_id] = IGNORE_INDEX
    return inputs, labels


def pretraining_batch(step: int, batch_size: int, sequence_length: int, seed: int = 42, suite: str = DEFAULT_SUITE):
    """The batch for 0-based optimizer step `step`, from `suite`'s stream."""
    stream = get_suite(suite)
    if not stream.bucket_steps:
        texts = [stream.pretraining_text(step * batch_size + r, seed) for r in range(batch_size)]
        return encode_documents(texts, sequence_length)
    texts = bucketed_texts(stream, step, batch_size, seed)
    inputs, labels = encode_documents(texts, sequence_length)
    width = max(len(t.encode("utf-8", errors="surrogatepass")) for t in texts) + 1  # BOS + bytes; labels: + EOS
    return inputs[:, :width].contiguous(), labels[:, :width].contiguous()


def bucketed_texts(stream, step: int, batch_size: int, seed: int) -> list[str]:
    """Step `step`'s documents under length bucketing (see the module docstring), in stream order."""
    window, slot = divmod(step, stream.bucket_steps)
    first = window * stream.bucket_steps * batch_size
    texts = [stream.pretraining_text(first + i, seed) for i in range(stream.bucket_steps * batch_size)]
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
    batches = [order[k * batch_size:(k + 1) * batch_size] for k in range(stream.bucket_steps)]
    random.Random(f"length-buckets:{seed}:{window}").shuffle(batches)
    return [texts[i] for i in sorted(batches[slot])]
